// envoyproxy/ratelimit's config files read as upstream reads them, errors in upstream's words.

#include "server/rls/config.h"

#include <absl/status/status.h>
#include <absl/strings/str_split.h>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <optional>

#include "common/status_macros.h"
#include "common/strings.h"
#include "server/rls/metadata.h"
#include "server/yaml_budget.h"

namespace floodgate::server::rls {

namespace {

namespace ext = ::envoy::extensions::common::ratelimit::v3;
using RateLimit = ::envoy::service::ratelimit::v3::RateLimitResponse::RateLimit;

// upstream's validKeys: one flat set, checked at every level of the file (a known key in
// the wrong place is ignored there, as upstream's YAML decoding ignores it), plus
// floodgate's extensions.
constexpr std::array<std::string_view, 23> kKnownKeys = {
    "domain", "key", "value", "descriptors", "rate_limit", "unit", "requests_per_unit", "unlimited",
    "shadow_mode", "quota_mode", "name", "replaces", "detailed_metric", "value_to_metric",
    "share_threshold", "metadata",
    // floodgate's extensions (docs/envoy.md)
    "algorithm", "burst", "refill", "period", "all_or_nothing", "prefetch", "prefetch_ttl"};

// kKnownKeys' position of `key`; kKnownKeys.size() when it is not one of them.
std::size_t KnownKeyIndex(std::string_view key) {
  return static_cast<std::size_t>(std::find(kKnownKeys.begin(), kKnownKeys.end(), key) -
                                  kKnownKeys.begin());
}

// A mapping's values by key, read in one pass. yaml-cpp's node["key"] walks the mapping and
// converts every key it passes into a new string: a descriptor's dozen lookups were most of
// the time to load a config near the node bound (two files of 393,213 nodes: 7.4 s at -O2,
// 1.0 s read so). As with node["key"], the first of duplicate keys wins and a key
// that is not there is an undefined node (false, and an error's line 0): `undefined`, the
// reader's one (FileReader::FieldsOf), outlives the Fields. Only kKnownKeys are kept:
// CheckKeys has rejected any other before a mapping is read.
class Fields {
 public:
  Fields(const YAML::Node& map, const YAML::Node& undefined) : undefined_(undefined) {
    if (!map.IsMap()) return;
    for (const auto& entry : map) {
      if (!entry.first.IsScalar()) continue;
      const std::size_t index = KnownKeyIndex(entry.first.Scalar());
      if (index < values_.size() && !values_[index]) values_[index] = entry.second;
    }
  }

  YAML::Node operator[](std::string_view key) const {
    const std::size_t index = KnownKeyIndex(key);
    if (index < values_.size() && values_[index]) return *values_[index];
    return undefined_;
  }

 private:
  std::array<std::optional<YAML::Node>, kKnownKeys.size()> values_;
  const YAML::Node& undefined_;
};

// How much of a wrong list element an error repeats.
constexpr std::size_t kMaxEcho = 200;

// Errors point at the node they are about, with upstream's text: "file:line: text".
class FileReader {
 public:
  explicit FileReader(const std::string& file) : file_(file) {}

  // The mapping's known keys, read once (Fields); valid while this reader lives.
  Fields FieldsOf(const YAML::Node& map) const { return Fields(map, undefined_); }

  absl::Status Error(const YAML::Node& node, std::string_view what) const {
    const int line = node.IsDefined() && node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}", file_, line, what));
  }
  // Upstream's decoding errors (a string where a number belongs...) all start so.
  absl::Status DecodeError(const YAML::Node& node, std::string_view what) const {
    return Error(node, fmt::format("error loading config file: {}", what));
  }

  absl::Status CheckKeys(const YAML::Node& node) const {
    if (node.IsMap()) {
      for (const auto& entry : node) {
        if (!entry.first.IsScalar()) {
          return Error(entry.first, "config error, key is not of type string");
        }
        const std::string& key = entry.first.Scalar();
        if (key == "delay") {
          // docs/envoy.md: Envoy's rate limit filter only allows or denies; nothing in RLS
          // v3 tells it to hold a request, so an admission with a delay would run at once.
          return Error(entry.first,
                       "config error, delay is not for Envoy's rate limit service: Envoy cannot "
                       "hold a request for its slot; use /v1/authz or /v1/check for delay=");
        }
        if (KnownKeyIndex(key) == kKnownKeys.size()) {
          return Error(entry.first, fmt::format("config error, unknown key '{}'", key));
        }
        // As upstream: metadata's keys are the user's own, checked when it is converted.
        if (key == "metadata") continue;
        if (auto s = CheckKeys(entry.second); !s.ok()) return s;
      }
    } else if (node.IsSequence()) {
      for (const auto& element : node) {
        if (!element.IsMap()) {
          // Upstream prints the element whole; a list of a million is cut to its start.
          std::string text = YAML::Dump(element);
          if (text.size() > kMaxEcho) text = text.substr(0, kMaxEcho) + "...";
          return Error(element,
                       fmt::format("config error, yaml file contains list of type other than "
                                   "map: {}",
                                   text));
        }
        if (auto s = CheckKeys(element); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> String(const YAML::Node& node, std::string_view key) const {
    if (!node) return std::string();
    if (node.IsNull()) return std::string();
    if (!node.IsScalar()) return DecodeError(node, fmt::format("{} must be a string", key));
    return node.Scalar();
  }
  absl::StatusOr<bool> Bool(const YAML::Node& node, std::string_view key) const {
    bool value = false;
    if (!node || node.IsNull()) return false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
      return DecodeError(node, fmt::format("{} must be true or false", key));
    }
    return value;
  }
  absl::StatusOr<std::uint32_t> Uint32(const YAML::Node& node, std::string_view key) const {
    std::uint32_t value = 0;
    if (!node || node.IsNull()) return 0u;
    if (!node.IsScalar() || !ParseDecimal(std::string_view(node.Scalar()), value)) {
      return DecodeError(node, fmt::format("{} must be a whole number from 0 to {}", key,
                                           std::numeric_limits<std::uint32_t>::max()));
    }
    return value;
  }
  absl::Status Sequence(const YAML::Node& node, std::string_view key) const {
    if (node && !node.IsNull() && !node.IsSequence()) {
      return DecodeError(node, fmt::format("{} must be a list", key));
    }
    return absl::OkStatus();
  }

 private:
  // yaml-cpp makes an undefined node only as the answer to a lookup that finds nothing.
  static YAML::Node Undefined() {
    const YAML::Node nothing(YAML::NodeType::Null);
    return nothing["-"];
  }

  const std::string& file_;
  YAML::Node undefined_ = Undefined();
};

absl::StatusOr<Unit> ParseUnit(const std::string& text) {
  std::string upper = text;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  Unit unit = RateLimit::UNKNOWN;
  if (!RateLimit::Unit_Parse(upper, &unit) || unit == RateLimit::UNKNOWN) {
    return absl::InvalidArgumentError(fmt::format("invalid rate limit unit '{}'", text));
  }
  return unit;
}

// The floodgate policy of a rate_limit: the rule's algorithm (fixed_window unless given)
// over its period (the unit unless `period:` is given), checked by Policy::Parse so a bad
// combination gets floodgate's own message.
absl::StatusOr<Policy> BuildPolicy(const FileReader& r, const YAML::Node& node,
                                   const Fields& fields, std::uint32_t requests_per_unit,
                                   std::string_view period) {
  std::string algorithm = "fixed_window";
  FG_ASSIGN(algorithm, r.String(fields["algorithm"], "algorithm"));
  if (algorithm.empty()) algorithm = "fixed_window";
  std::string text = fmt::format("{}:{}/{}", algorithm, requests_per_unit, period);
  // The policy options a rate_limit may carry, spelled as in policy strings.
  for (const char* option : {"burst", "refill", "prefetch", "prefetch_ttl"}) {
    const YAML::Node given = fields[option];
    if (!given) continue;
    std::string value;
    FG_ASSIGN(value, r.String(given, option));
    text += fmt::format(",{}={}", option, value);
  }
  auto policy = Policy::Parse(text);
  if (!policy.ok()) return r.Error(node, fmt::format("rate_limit: {}", MessageOf(policy.status())));
  if (policy->delay.count() != 0) {  // unreachable through the keys above; kept with them
    return r.Error(node, "rate_limit: delay is not for Envoy's rate limit service");
  }
  return *policy;
}

// What a descriptor (not its rate_limit) says about its limit.
struct DescriptorFlags {
  bool shadow = false;
  bool quota = false;
  bool detailed_metric = false;
};

absl::StatusOr<RlsLimit> ParseRateLimit(const FileReader& r, const YAML::Node& node,
                                        const std::string& stats_key, DescriptorFlags flags) {
  if (!node.IsMap()) return r.DecodeError(node, "rate_limit must be a mapping");
  const Fields fields = r.FieldsOf(node);
  RlsLimit limit;
  limit.stats_key = stats_key;
  limit.shadow = flags.shadow;
  limit.quota = flags.quota;
  limit.detailed_metric = flags.detailed_metric;
  FG_ASSIGN(limit.requests_per_unit, r.Uint32(fields["requests_per_unit"], "requests_per_unit"));
  FG_ASSIGN(limit.unlimited, r.Bool(fields["unlimited"], "unlimited"));
  FG_ASSIGN(limit.name, r.String(fields["name"], "name"));
  std::string unit_text;
  FG_ASSIGN(unit_text, r.String(fields["unit"], "unit"));
  const auto unit = ParseUnit(unit_text);
  const YAML::Node period_node = fields["period"];
  if (limit.unlimited) {
    if (unit.ok()) {
      return r.Error(fields["unit"], "should not specify rate limit unit when unlimited");
    }
    if (period_node) return r.Error(period_node, "should not specify a period when unlimited");
  } else if (period_node) {
    // floodgate's extension (upstream's #190): any window length instead of a unit.
    if (fields["unit"]) return r.Error(fields["unit"], "rate_limit gives both unit and period");
  } else if (!unit.ok()) {
    return r.Error(fields["unit"] ? fields["unit"] : node, MessageOf(unit.status()));
  }
  if (unit.ok()) limit.unit = *unit;

  FG_RETURN_IF_ERROR(r.Sequence(fields["replaces"], "replaces"));
  for (const auto& entry : fields["replaces"]) {
    std::string name;
    FG_ASSIGN(name, r.String(r.FieldsOf(entry)["name"], "name"));
    if (name.empty()) return r.Error(entry, "should not have an empty replaces entry");
    if (name == limit.name) {
      return r.Error(entry, "replaces should not contain name of same descriptor");
    }
    limit.replaces.push_back(std::move(name));
  }

  if (limit.unlimited) return limit;
  std::string period;
  if (period_node) {
    FG_ASSIGN(period, r.String(period_node, "period"));
    auto parsed = ParseDuration(period);
    if (!parsed.ok()) {
      return r.Error(period_node, fmt::format("period: {}", MessageOf(parsed.status())));
    }
    limit.period = *parsed;
    limit.upstream_window = false;
  } else {
    limit.period = *UnitLength(limit.unit);
    period =
        fmt::format("{}s", std::chrono::duration_cast<std::chrono::seconds>(limit.period).count());
  }
  if (fields["algorithm"]) limit.upstream_window = false;
  limit.upstream_counter = limit.upstream_window && !fields["burst"] && !fields["refill"] &&
                           !fields["prefetch"] && !fields["prefetch_ttl"];
  if (limit.requests_per_unit == 0) {
    // Upstream denies every counted hit of a limit 0; floodgate's policies start at 1, so
    // the engine answers these itself. The extensions still get checked.
    if (fields["algorithm"] || fields["burst"] || fields["refill"] || fields["prefetch"] ||
        fields["prefetch_ttl"]) {
      FG_RETURN_IF_ERROR(BuildPolicy(r, node, fields, 1, period).status());
    }
    return limit;
  }
  FG_ASSIGN(limit.policy, BuildPolicy(r, node, fields, limit.requests_per_unit, period));
  if (limit.policy->algorithm != Algorithm::kFixedWindow) {
    limit.upstream_window = false;
    limit.upstream_counter = false;
  }
  return limit;
}

}  // namespace

std::optional<std::chrono::seconds> UnitLength(Unit unit) {
  using std::chrono::seconds;
  switch (unit) {
    case RateLimit::SECOND:
      return seconds(1);
    case RateLimit::MINUTE:
      return seconds(60);
    case RateLimit::HOUR:
      return seconds(3600);
    case RateLimit::DAY:
      return seconds(86400);
    case RateLimit::WEEK:
      return seconds(7 * 86400);
    case RateLimit::MONTH:
      return seconds(30 * 86400);
    case RateLimit::YEAR:
      return seconds(365 * 86400);
    default:
      return std::nullopt;
  }
}

// Builds an RlsConfig file by file; RlsConfig's only writer.
class ConfigBuilder {
 public:
  explicit ConfigBuilder(DomainFiles domains) : domains_(domains) {}

  absl::Status AddFile(const ConfigFile& file) {
    FileReader r(file.name);
    FG_RETURN_IF_ERROR(budget_.Charge(file.text, file.name));
    YAML::Node root;
    try {
      root = YAML::Load(file.text);
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(
          fmt::format("{}:{}: error loading config file: {}", file.name, e.mark.line + 1, e.msg));
    }
    if (root.IsDefined() && !root.IsNull() && !root.IsMap()) {
      return r.DecodeError(root, "the file must be a mapping of keys");
    }
    FG_RETURN_IF_ERROR(r.CheckKeys(root));
    const Fields fields = r.FieldsOf(root);
    std::string domain;
    if (root.IsMap()) FG_ASSIGN(domain, r.String(fields["domain"], "domain"));
    if (domain.empty()) {
      return r.Error(root.IsMap() && fields["domain"] ? fields["domain"] : root,
                     "config file cannot have empty domain");
    }
    bool all_or_nothing = false;
    FG_ASSIGN(all_or_nothing, r.Bool(fields["all_or_nothing"], "all_or_nothing"));
    if (auto it = config_->domains_.find(ToAbsl(domain)); it != config_->domains_.end()) {
      if (domains_ == DomainFiles::kOneFileEach) {
        return r.Error(fields["domain"],
                       fmt::format("duplicate domain '{}' in config file", domain));
      }
      // MERGE_DOMAIN_CONFIG: upstream loads the file's descriptors into the domain's tree (a
      // composite key both files have is a duplicate). all_or_nothing is floodgate's and per
      // domain: the files must agree on it.
      RlsDomain& merged = *it->second;
      if (all_or_nothing != merged.all_or_nothing) {
        return r.Error(fields["all_or_nothing"] ? fields["all_or_nothing"] : fields["domain"],
                       fmt::format("domain '{}' is merged from files that disagree on "
                                   "all_or_nothing",
                                   domain));
      }
      return LoadDescriptors(r, fields["descriptors"], domain + ".", merged.root);
    }
    auto loaded = std::make_unique<RlsDomain>();
    loaded->all_or_nothing = all_or_nothing;
    FG_RETURN_IF_ERROR(LoadDescriptors(r, fields["descriptors"], domain + ".", loaded->root));
    config_->domains_.emplace(domain, std::move(loaded));
    return absl::OkStatus();
  }

  std::shared_ptr<const RlsConfig> Finish() { return std::move(config_); }

 private:
  absl::Status LoadDescriptors(const FileReader& r, const YAML::Node& list,
                               const std::string& parent_key, DescriptorNode& into) {
    FG_RETURN_IF_ERROR(r.Sequence(list, "descriptors"));
    if (!list) return absl::OkStatus();
    for (const auto& descriptor : list) {
      const Fields fields = r.FieldsOf(descriptor);
      std::string key;
      std::string value;
      FG_ASSIGN(key, r.String(fields["key"], "key"));
      FG_ASSIGN(value, r.String(fields["value"], "value"));
      if (key.empty()) return r.Error(descriptor, "descriptor has empty key");
      // Upstream's composite key: "key" or "key_value" (so key "a_b" with no value and key
      // "a" with value "b" collide, as they do upstream).
      std::string composite = value.empty() ? key : key + "_" + value;
      const std::string stats_key = parent_key + composite;
      if (into.children.contains(composite)) {
        return r.Error(fields["key"],
                       fmt::format("duplicate descriptor composite key '{}'", stats_key));
      }
      auto node = std::make_unique<DescriptorNode>();
      DescriptorFlags flags;
      FG_ASSIGN(flags.shadow, r.Bool(fields["shadow_mode"], "shadow_mode"));
      FG_ASSIGN(flags.quota, r.Bool(fields["quota_mode"], "quota_mode"));
      FG_ASSIGN(flags.detailed_metric, r.Bool(fields["detailed_metric"], "detailed_metric"));
      FG_ASSIGN(node->value_to_metric, r.Bool(fields["value_to_metric"], "value_to_metric"));
      config_->uses_value_to_metric_ = config_->uses_value_to_metric_ || node->value_to_metric;
      FG_ASSIGN(node->share_threshold, r.Bool(fields["share_threshold"], "share_threshold"));
      const bool wildcard = composite.find('*') != std::string::npos;
      if (node->share_threshold && !wildcard) {
        return r.Error(fields["share_threshold"],
                       fmt::format("share_threshold can only be used with wildcard values "
                                   "(containing '*'), but found key '{}'",
                                   composite));
      }
      if (const YAML::Node rate_limit = fields["rate_limit"]; rate_limit && !rate_limit.IsNull()) {
        FG_ASSIGN(node->limit, ParseRateLimit(r, rate_limit, stats_key, flags));
      }
      if (const YAML::Node metadata = fields["metadata"]; metadata) {
        auto parsed = MetadataFromYaml(metadata);
        if (!parsed.ok()) {
          return r.Error(metadata,
                         fmt::format("error parsing metadata: {}", MessageOf(parsed.status())));
        }
        node->metadata = *std::move(parsed);
      }
      FG_RETURN_IF_ERROR(LoadDescriptors(r, fields["descriptors"], stats_key + ".", *node));
      if (wildcard) into.wildcards.push_back(Wildcard{composite, absl::StrSplit(composite, '*')});
      into.children.emplace(std::move(composite), std::move(node));
    }
    return absl::OkStatus();
  }

  const DomainFiles domains_;
  std::shared_ptr<RlsConfig> config_ = std::make_shared<RlsConfig>();
  YamlBudget budget_;  // the files' nodes together: what the config will hold
};

absl::StatusOr<std::shared_ptr<const RlsConfig>> ParseRlsConfig(
    const std::vector<ConfigFile>& files, DomainFiles domains) {
  ConfigBuilder builder(domains);
  for (const ConfigFile& file : files) FG_RETURN_IF_ERROR(builder.AddFile(file));
  return builder.Finish();
}

const RlsDomain* RlsConfig::Domain(std::string_view domain) const {
  const auto it = domains_.find(ToAbsl(domain));
  return it == domains_.end() ? nullptr : it->second.get();
}

bool Wildcard::Matches(std::string_view composite) const {
  if (parts.size() == 1) return parts[0] == composite;
  if (!composite.starts_with(parts.front()) || !composite.ends_with(parts.back())) return false;
  std::size_t fixed = 0;
  for (const std::string& part : parts) fixed += part.size();
  if (composite.size() < fixed) return false;
  std::string_view rest = composite.substr(
      parts.front().size(), composite.size() - parts.front().size() - parts.back().size());
  for (std::size_t i = 1; i + 1 < parts.size(); ++i) {
    const std::size_t at = rest.find(parts[i]);
    if (at == std::string_view::npos) return false;
    rest.remove_prefix(at + parts[i].size());
  }
  return true;
}

const RlsLimit* RlsConfig::Find(std::string_view domain,
                                const ext::RateLimitDescriptor& descriptor) const {
  return Match(domain, descriptor).limit;
}

RlsMatch RlsConfig::Match(std::string_view domain,
                          const ext::RateLimitDescriptor& descriptor) const {
  RlsMatch match;
  const RlsDomain* found = Domain(domain);
  if (found == nullptr) return match;
  const DescriptorNode* level = &found->root;
  const DescriptorNode* reached = nullptr;  // the node whose limit applies
  const int entries = descriptor.entries_size();
  std::string composite;
  // Upstream's value_to_metric key, level by level, when some node may change it.
  std::string value_to_metric_key;
  if (uses_value_to_metric_) value_to_metric_key.assign(domain);
  for (int i = 0; i < entries; ++i) {
    const auto& entry = descriptor.entries(i);
    // Per level as upstream's GetLimit: the exact "key_value", else the first wildcard
    // (in file order) that matches it, else the key-only default.
    composite.assign(entry.key()).append("_").append(entry.value());
    const DescriptorNode* next = nullptr;
    const Wildcard* by_wildcard = nullptr;
    if (auto it = level->children.find(composite); it != level->children.end()) {
      next = it->second.get();
    }
    if (next == nullptr) {
      for (const Wildcard& wildcard : level->wildcards) {
        if (wildcard.Matches(composite)) {
          next = level->children.find(wildcard.key)->second.get();
          by_wildcard = &wildcard;
          break;
        }
      }
    }
    const bool by_value = next != nullptr;
    if (next == nullptr) {
      if (auto it = level->children.find(entry.key()); it != level->children.end()) {
        next = it->second.get();
      }
    }
    // The wildcard's value part ("key_files*" -> "files*"), as upstream's TrimPrefix.
    const auto pattern_value = [&](const std::string& key) {
      const std::string prefix = entry.key() + "_";
      return key.starts_with(prefix) ? key.substr(prefix.size()) : key;
    };
    if (by_wildcard != nullptr && next->share_threshold) {
      match.shared_values.resize(static_cast<std::size_t>(entries));
      match.shared_values[static_cast<std::size_t>(i)] = pattern_value(by_wildcard->key);
    }
    if (uses_value_to_metric_) {
      value_to_metric_key += '.';
      value_to_metric_key += entry.key();
    }
    if (uses_value_to_metric_ && next != nullptr) {
      std::string value;
      if (by_wildcard != nullptr) {
        value = next->share_threshold   ? pattern_value(by_wildcard->key)
                : next->value_to_metric ? entry.value()
                                        : pattern_value(by_wildcard->key);
      } else if (by_value || next->value_to_metric) {
        value = entry.value();
      }
      if (!value.empty()) value_to_metric_key += "_" + value;
    }
    // Only the node the last entry reaches gives the limit.
    if (next != nullptr && next->limit.has_value() && i == entries - 1) reached = next;
    if (next == nullptr || next->children.empty()) break;
    level = next;
  }
  if (reached == nullptr) {
    match.shared_values.clear();
    return match;
  }
  match.limit = &*reached->limit;
  if (uses_value_to_metric_ && !match.limit->detailed_metric &&
      value_to_metric_key != match.limit->stats_key) {
    match.value_to_metric_key = std::move(value_to_metric_key);
  }
  // Upstream carries the node's metadata on its copy of the limit, and loses it where GetLimit
  // builds the limit anew: detailed_metric on a node without children, or a value_to_metric key.
  const bool rebuilt = (match.limit->detailed_metric && reached->children.empty()) ||
                       !match.value_to_metric_key.empty();
  if (!rebuilt) match.metadata = reached->metadata.get();
  return match;
}

}  // namespace floodgate::server::rls

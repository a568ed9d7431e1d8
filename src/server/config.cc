// The service's YAML config: parsed and checked, every error naming file, line and reason.

#include "server/config.h"

#include <absl/container/flat_hash_map.h>
#include <absl/status/status.h>
#include <absl/strings/ascii.h>
#include <floodgate/store.h>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/status_macros.h"
#include "common/strings.h"
#include "server/config_file.h"
#include "server/yaml_budget.h"

namespace floodgate::server {

namespace {

namespace ip = boost::asio::ip;

// Errors point at the node they are about: "file:line: what".
class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  absl::Status Error(const YAML::Node& node, std::string_view what) const {
    const int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}", source_, line, what));
  }
  absl::StatusOr<std::string> String(const YAML::Node& node, std::string_view path) const {
    if (!node.IsScalar()) return Error(node, fmt::format("{} must be a string", path));
    return node.Scalar();
  }
  absl::StatusOr<std::int64_t> Integer(const YAML::Node& node, std::string_view path,
                                       std::int64_t min, std::int64_t max) const {
    std::int64_t value = 0;
    if (!node.IsScalar() || !ParseDecimal(std::string_view(node.Scalar()), value) || value < min ||
        value > max) {
      return Error(node, fmt::format("{} must be a whole number from {} to {}", path, min, max));
    }
    return value;
  }
  absl::StatusOr<bool> Bool(const YAML::Node& node, std::string_view path) const {
    bool value = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
      return Error(node, fmt::format("{} must be true or false", path));
    }
    return value;
  }
  // Every key of `map` must be one of `known`.
  absl::Status KnownKeys(const YAML::Node& map, std::string_view path,
                         std::initializer_list<std::string_view> known) const {
    for (const auto& entry : map) {
      const std::string key = entry.first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string list;
        for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        return Error(entry.first, fmt::format("unknown key \"{}\" in {} (known: {})", key,
                                              path.empty() ? "the config" : path, list));
      }
    }
    return absl::OkStatus();
  }

 private:
  const std::string& source_;
};

absl::StatusOr<Network> ParseNetwork(std::string_view text) {
  const std::string s(text);
  boost::system::error_code ec;
  if (s.find('/') == std::string::npos) {
    const ip::address address = ip::make_address(s, ec);
    if (ec)
      return absl::InvalidArgumentError(fmt::format("\"{}\" is not an IP address or CIDR", s));
    if (address.is_v4()) return Network(ip::network_v4(address.to_v4(), 32));
    return Network(ip::network_v6(address.to_v6(), 128));
  }
  if (s.find(':') == std::string::npos) {
    const ip::network_v4 net = ip::make_network_v4(s, ec);
    if (!ec) return Network(net.canonical());
  } else {
    const ip::network_v6 net = ip::make_network_v6(s, ec);
    if (!ec) return Network(net.canonical());
  }
  return absl::InvalidArgumentError(fmt::format("\"{}\" is not an IP address or CIDR", s));
}

absl::StatusOr<std::vector<IdentityPart>> ParseIdentify(std::string_view text) {
  std::vector<IdentityPart> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t plus = text.find('+', start);
    const std::string_view part =
        text.substr(start, plus == std::string_view::npos ? std::string_view::npos : plus - start);
    if (part == "ip") {
      parts.push_back({IdentityPart::Kind::kIp, ""});
    } else if (part.starts_with("header:") && part.size() > 7) {
      parts.push_back({IdentityPart::Kind::kHeader, std::string(part.substr(7))});
    } else if (part.starts_with("cookie:") && part.size() > 7) {
      parts.push_back({IdentityPart::Kind::kCookie, std::string(part.substr(7))});
    } else {
      return absl::InvalidArgumentError(fmt::format(
          "unknown identity \"{}\" (ip, header:NAME, cookie:NAME, or several joined by '+')",
          part));
    }
    if (plus == std::string_view::npos) break;
    start = plus + 1;
  }
  if (std::count_if(parts.begin(), parts.end(), [](const IdentityPart& p) {
        return p.kind == IdentityPart::Kind::kCookie;
      }) > 1) {
    return absl::InvalidArgumentError("at most one cookie per rule");
  }
  return parts;
}

bool ValidName(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

absl::StatusOr<Policy> ParsePolicy(const Reader& r, const YAML::Node& node,
                                   const std::string& path) {
  std::string text;
  FG_ASSIGN(text, r.String(node, path));
  auto parsed = Policy::Parse(text);
  if (!parsed.ok()) return r.Error(node, fmt::format("{}: {}", path, MessageOf(parsed.status())));
  return *parsed;
}

// A map of names to policies (overrides, a plan table), in file order.
absl::StatusOr<std::vector<std::pair<std::string, Policy>>> ParsePolicyMap(
    const Reader& r, const YAML::Node& node, const std::string& path) {
  if (!node.IsMap())
    return r.Error(node, fmt::format("{} must be a mapping of names to policies", path));
  std::vector<std::pair<std::string, Policy>> out;
  for (const auto& entry : node) {
    std::string name;
    FG_ASSIGN(name, r.String(entry.first, path));
    Policy policy;
    FG_ASSIGN(policy, ParsePolicy(r, entry.second, fmt::format("{}[\"{}\"]", path, name)));
    out.emplace_back(std::move(name), policy);
  }
  return out;
}

absl::StatusOr<Limit> ParseLimit(const Reader& r, const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) return r.Error(node, fmt::format("{} must be a mapping", path));
  if (auto s = r.KnownKeys(node, path, {"name", "policy", "shadow", "overrides", "policy_from"});
      !s.ok()) {
    return s;
  }
  Limit limit;
  if (!node["name"]) return r.Error(node, fmt::format("{} needs a name", path));
  FG_ASSIGN(limit.name, r.String(node["name"], path + ".name"));
  if (!ValidName(limit.name)) {
    return r.Error(node["name"], fmt::format("{}.name must be 1-64 of [A-Za-z0-9_.-]", path));
  }
  if (node["shadow"]) FG_ASSIGN(limit.shadow, r.Bool(node["shadow"], path + ".shadow"));
  if (node["overrides"]) {
    FG_ASSIGN(limit.overrides, ParsePolicyMap(r, node["overrides"], path + ".overrides"));
  }
  if (const YAML::Node from = node["policy_from"]) {
    const std::string at = path + ".policy_from";
    if (!from.IsMap()) return r.Error(from, fmt::format("{} must be a mapping", at));
    if (auto s = r.KnownKeys(from, at, {"header", "map", "default"}); !s.ok()) return s;
    if (!from["header"] || !from["map"]) {
      return r.Error(from, fmt::format("{} needs a header and a map", at));
    }
    FG_ASSIGN(limit.plan_header, r.String(from["header"], at + ".header"));
    FG_ASSIGN(limit.plans, ParsePolicyMap(r, from["map"], at + ".map"));
    if (from["default"]) {
      Policy fallback;
      FG_ASSIGN(fallback, ParsePolicy(r, from["default"], at + ".default"));
      limit.plan_fallback = fallback;
    }
  }
  if (node["policy"]) {
    FG_ASSIGN(limit.policy, ParsePolicy(r, node["policy"], path + ".policy"));
  } else if (limit.plan_fallback) {
    limit.policy = *limit.plan_fallback;
  } else {
    return r.Error(node, fmt::format("{} needs a policy (or a policy_from with a default)", path));
  }
  return limit;
}

absl::StatusOr<Rule> ParseRule(const Reader& r, const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) return r.Error(node, fmt::format("{} must be a mapping", path));
  if (auto s = r.KnownKeys(
          node, path,
          {"name", "match", "identify", "policy", "limits", "cost", "cost_from_response", "hold"});
      !s.ok()) {
    return s;
  }
  Rule rule;
  if (!node["name"]) return r.Error(node, fmt::format("{} needs a name", path));
  FG_ASSIGN(rule.name, r.String(node["name"], path + ".name"));
  if (!ValidName(rule.name)) {
    return r.Error(node["name"], fmt::format("{}.name must be 1-64 of [A-Za-z0-9_.-]", path));
  }
  if (const YAML::Node match = node["match"]) {
    if (!match.IsMap()) return r.Error(match, fmt::format("{}.match must be a mapping", path));
    if (auto s = r.KnownKeys(match, path + ".match", {"path_prefix", "methods"}); !s.ok()) return s;
    if (match["path_prefix"]) {
      FG_ASSIGN(rule.path_prefix, r.String(match["path_prefix"], path + ".match.path_prefix"));
      if (!rule.path_prefix.starts_with('/')) {
        return r.Error(match["path_prefix"],
                       fmt::format("{}.match.path_prefix must start with '/'", path));
      }
    }
    if (const YAML::Node methods = match["methods"]) {
      if (!methods.IsSequence()) {
        return r.Error(methods, fmt::format("{}.match.methods must be a list", path));
      }
      for (const auto& m : methods) {
        std::string method;
        FG_ASSIGN(method, r.String(m, path + ".match.methods[]"));
        std::transform(method.begin(), method.end(), method.begin(),
                       [](unsigned char c) { return std::toupper(c); });
        rule.methods.push_back(method);
      }
    }
  }
  std::string identify = "ip";
  if (node["identify"]) FG_ASSIGN(identify, r.String(node["identify"], path + ".identify"));
  if (identify != "none") {
    auto parts = ParseIdentify(identify);
    if (!parts.ok()) {
      return r.Error(node["identify"],
                     fmt::format("{}.identify: {}", path, MessageOf(parts.status())));
    }
    rule.identify = *std::move(parts);
  }
  if (node["policy"].IsDefined() == node["limits"].IsDefined()) {
    return r.Error(node,
                   fmt::format("{} needs a policy or a list of limits (one of the two)", path));
  }
  if (node["policy"]) {
    Limit limit;
    limit.name = limit.qualified = rule.name;
    FG_ASSIGN(limit.policy, ParsePolicy(r, node["policy"], path + ".policy"));
    rule.limits.push_back(std::move(limit));
  } else {
    const YAML::Node limits = node["limits"];
    if (!limits.IsSequence() || limits.size() == 0 || limits.size() > kMaxItems) {
      return r.Error(limits,
                     fmt::format("{}.limits must be a list of 1 to {} limits", path, kMaxItems));
    }
    for (std::size_t i = 0; i < limits.size(); ++i) {
      Limit limit;
      FG_ASSIGN(limit, ParseLimit(r, limits[i], fmt::format("{}.limits[{}]", path, i)));
      for (const Limit& other : rule.limits) {
        if (other.name == limit.name) {
          return r.Error(
              limits[i]["name"],
              fmt::format("{}.limits: limit name \"{}\" is used twice", path, limit.name));
        }
      }
      limit.qualified = rule.name + "." + limit.name;
      rule.limits.push_back(std::move(limit));
    }
  }
  if (node["cost"]) FG_ASSIGN(rule.cost, r.Integer(node["cost"], path + ".cost", 0, kMaxCost));
  if (node["cost_from_response"]) {
    FG_ASSIGN(rule.cost_from_response,
              r.Bool(node["cost_from_response"], path + ".cost_from_response"));
    if (rule.cost_from_response && rule.cost < 1) {
      return r.Error(node["cost"], fmt::format("{}.cost is the estimate each request reserves "
                                               "with cost_from_response: at least 1",
                                               path));
    }
  }
  if (const YAML::Node hold = node["hold"]) {
    if (!rule.cost_from_response) {
      return r.Error(hold, fmt::format("{}.hold is how long a reservation waits for its "
                                       "settle: give it with cost_from_response: true",
                                       path));
    }
    std::string text;
    FG_ASSIGN(text, r.String(hold, path + ".hold"));
    auto d = ParseDuration(text);
    if (!d.ok() || *d < kMinHold || *d > kMaxHold) {
      return r.Error(
          hold, fmt::format("{}.hold must be a duration from 1ms to 24h, got \"{}\"", path, text));
    }
    rule.hold = *d;
  }
  return rule;
}

// The most limits one request may meet: a request matches the rules whose prefix starts its
// path and whose methods include its own (or which name none). The requests meeting the
// most are those to a rule's prefix, with one method, so it is enough to sum along each
// chain of prefixes, once for the rules naming no method and once per method. Prefixes in
// sorted order put each chain on a stack (a prefix follows every prefix of itself), so after
// the sort each rule's limits are added and taken away once, where summing every pair of
// rules grew with their square (60,000 rules: 11 s of CPU, 26 s on a busy machine).
absl::Status CheckLimitsPerRequest(const Reader& r, const YAML::Node& rules,
                                   const std::vector<Rule>& parsed) {
  std::vector<std::size_t> order(parsed.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return parsed[a].path_prefix < parsed[b].path_prefix;
  });
  std::vector<std::size_t> chain;  // rules whose prefixes start the current one, in sort order
  std::size_t anyone = 0;          // limits of the rules on the chain that name no method
  absl::flat_hash_map<std::string, std::size_t> per_method;  // theirs, by method
  std::map<std::size_t, std::size_t> method_sums;  // per_method's values, counted: the max
  const auto add = [&](const Rule& rule, bool adding) {
    if (rule.methods.empty()) {
      anyone = adding ? anyone + rule.limits.size() : anyone - rule.limits.size();
      return;
    }
    for (const std::string& method : rule.methods) {
      std::size_t& sum = per_method[method];
      if (sum > 0 && --method_sums[sum] == 0) method_sums.erase(sum);
      sum = adding ? sum + rule.limits.size() : sum - rule.limits.size();
      if (sum > 0) ++method_sums[sum];
    }
  };
  for (const std::size_t i : order) {
    const std::string& prefix = parsed[i].path_prefix;
    while (!chain.empty() && !prefix.starts_with(parsed[chain.back()].path_prefix)) {
      add(parsed[chain.back()], false);
      chain.pop_back();
    }
    chain.push_back(i);
    add(parsed[i], true);
    const std::size_t most = method_sums.empty() ? 0 : method_sums.rbegin()->first;
    if (anyone + most <= kMaxItems) continue;
    // Which method meets the most, and the rules it meets, in config order.
    std::string method;
    for (const auto& [name, sum] : per_method) {
      if (sum == most && most > 0 && (method.empty() || name < method)) method = name;
    }
    std::vector<std::size_t> met;
    for (const std::size_t j : chain) {
      const std::vector<std::string>& m = parsed[j].methods;
      if (m.empty() || std::find(m.begin(), m.end(), method) != m.end()) met.push_back(j);
    }
    std::sort(met.begin(), met.end());
    std::string names;
    for (std::size_t k = 0; k < met.size() && k < kMaxItems + 1; ++k) {
      names += (names.empty() ? "" : ", ") + parsed[met[k]].name;
    }
    if (met.size() > kMaxItems + 1)
      names += fmt::format(" and {} more", met.size() - kMaxItems - 1);
    return r.Error(rules[i], fmt::format("a {}request to {} matches rules {} with {} limits in "
                                         "all; at most {} apply to one request",
                                         method.empty() ? "" : method + " ", prefix, names,
                                         anyone + most, kMaxItems));
  }
  return absl::OkStatus();
}

}  // namespace

bool Rule::Matches(std::string_view method, std::string_view path) const {
  if (!path.starts_with(path_prefix)) return false;
  return methods.empty() || std::find(methods.begin(), methods.end(), method) != methods.end();
}

const Policy& Limit::For(std::string_view identity, std::string_view plan) const {
  for (const auto& [name, override] : overrides) {
    if (name == identity) return override;
  }
  if (!plan_header.empty()) {
    for (const auto& [name, chosen] : plans) {
      if (name == plan) return chosen;
    }
    if (plan_fallback) return *plan_fallback;
  }
  return policy;
}

const IdentityPart* Rule::cookie() const {
  for (const IdentityPart& part : identify) {
    if (part.kind == IdentityPart::Kind::kCookie) return &part;
  }
  return nullptr;
}

std::string StoreConfig::EffectiveUrl() const {
  if (!url.starts_with("redis")) return url;
  std::string out = url;
  const auto add = [&](std::string_view name, const std::string& value) {
    if (url.find(std::string(name) + "=") != std::string::npos) return;  // the URL says
    out += (out.find('?') == std::string::npos ? "?" : "&");
    out += fmt::format("{}={}", name, value);
  };
  add("prefix", prefix);
  add("timeout", fmt::format("{}us", timeout.count()));
  add("on_error", on_error == OnError::kFailOpen     ? "fail_open"
                  : on_error == OnError::kFailClosed ? "fail_closed"
                                                     : "local");
  // The service starts, answering by on_error, while Redis is still down (a limiter
  // and its Redis often restart together); lazy_connect=0 in the URL fails fast instead.
  add("lazy_connect", "1");
  return out;
}

std::vector<const Rule*> ServerConfig::MatchAll(std::string_view method,
                                                std::string_view path) const {
  std::vector<const Rule*> matched;
  for (const Rule& rule : rules) {
    if (rule.Matches(method, path)) matched.push_back(&rule);
  }
  return matched;
}

const Rule* ServerConfig::Find(std::string_view name) const {
  for (const Rule& rule : rules) {
    if (rule.name == name) return &rule;
  }
  return nullptr;
}

bool ServerConfig::Trusted(const boost::asio::ip::address& address) const {
  for (const Network& net : trusted_proxies) {
    if (const auto* v4 = std::get_if<ip::network_v4>(&net)) {
      if (address.is_v4() && ip::network_v4(address.to_v4(), 32).is_subnet_of(*v4)) return true;
      if (address.is_v4() && ip::network_v4(address.to_v4(), 32) == *v4) return true;
    } else if (const auto* v6 = std::get_if<ip::network_v6>(&net)) {
      if (!address.is_v6()) continue;
      const ip::network_v6 host(address.to_v6(), 128);
      if (host == *v6 || host.is_subnet_of(*v6)) return true;
    }
  }
  return false;
}

absl::StatusOr<std::pair<std::string, std::uint16_t>> ParseListen(std::string_view listen) {
  std::string_view host, port;
  if (listen.starts_with('[')) {
    const std::size_t close = listen.find("]:");
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(fmt::format("listen \"{}\" must be [IPv6]:PORT", listen));
    }
    host = listen.substr(1, close - 1);
    port = listen.substr(close + 2);
  } else {
    const std::size_t colon = listen.rfind(':');
    if (colon == std::string_view::npos) {
      return absl::InvalidArgumentError(fmt::format("listen \"{}\" must be HOST:PORT", listen));
    }
    host = listen.substr(0, colon);
    port = listen.substr(colon + 1);
  }
  std::uint16_t number = 0;
  if (host.empty() || !ParseDecimal(port, number)) {
    return absl::InvalidArgumentError(fmt::format("listen \"{}\" must be HOST:PORT", listen));
  }
  return std::pair{std::string(host), number};
}

namespace {

// The admin token: the file's text without the whitespace around it, printable ASCII
// without spaces (it is compared with what follows "Bearer " in a header).
absl::StatusOr<std::string> ReadAdminToken(const std::string& path) {
  auto text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  const std::string_view token = ToStd(absl::StripAsciiWhitespace(*text));
  if (token.size() < kMinAdminTokenBytes || token.size() > kMaxAdminTokenBytes) {
    return absl::InvalidArgumentError(fmt::format("the token must be {} to {} characters, got {}",
                                                  kMinAdminTokenBytes, kMaxAdminTokenBytes,
                                                  token.size()));
  }
  if (!std::all_of(token.begin(), token.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    return absl::InvalidArgumentError(
        "the token must be printable ASCII without spaces (it follows \"Bearer \")");
  }
  return std::string(token);
}

}  // namespace

absl::StatusOr<ServerConfig> ParseConfig(std::string_view yaml, const std::string& source) {
  Reader r(source);
  if (auto s = YamlBudget().Charge(yaml, source); !s.ok()) return s;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}", source, e.mark.line + 1, e.msg));
  }
  ServerConfig config;
  config.source = source;
  if (!root || root.IsNull()) return config;  // an empty file: every default
  if (!root.IsMap()) return r.Error(root, "the config must be a mapping of keys");
  if (auto s = r.KnownKeys(
          root, "",
          {"listen", "grpc_listen", "rls", "store", "trusted_proxies", "authz_deny_status",
           "max_waiting", "demo", "shadow", "inline_policies", "rules", "admin"});
      !s.ok()) {
    return s;
  }
  if (root["listen"]) {
    FG_ASSIGN(config.listen, r.String(root["listen"], "listen"));
    config.listen_given = true;
    if (auto l = ParseListen(config.listen); !l.ok()) {
      return r.Error(root["listen"], MessageOf(l.status()));
    }
  }
  if (root["grpc_listen"]) {
    FG_ASSIGN(config.grpc_listen, r.String(root["grpc_listen"], "grpc_listen"));
    config.grpc_listen_given = true;
    if (auto l = ParseListen(config.grpc_listen); !l.ok()) {
      return r.Error(root["grpc_listen"], fmt::format("grpc_listen: {}", MessageOf(l.status())));
    }
  }
  if (const YAML::Node rls = root["rls"]) {
    if (!rls.IsMap()) return r.Error(rls, "rls must be a mapping");
    if (auto s = r.KnownKeys(
            rls, "rls", {"runtime_root", "runtime_subdirectory", "ignore_dotfiles", "on_error"});
        !s.ok()) {
      return s;
    }
    if (rls["runtime_root"]) {
      FG_ASSIGN(config.rls.runtime_root, r.String(rls["runtime_root"], "rls.runtime_root"));
    }
    if (rls["runtime_subdirectory"]) {
      FG_ASSIGN(config.rls.runtime_subdirectory,
                r.String(rls["runtime_subdirectory"], "rls.runtime_subdirectory"));
    }
    if (rls["ignore_dotfiles"]) {
      FG_ASSIGN(config.rls.ignore_dotfiles, r.Bool(rls["ignore_dotfiles"], "rls.ignore_dotfiles"));
    }
    if (rls["on_error"]) {
      std::string mode;
      FG_ASSIGN(mode, r.String(rls["on_error"], "rls.on_error"));
      // Only `error` here: the other answers are the store's (store.on_error).
      if (mode != "error" && mode != "store") {
        return r.Error(rls["on_error"],
                       fmt::format("rls.on_error must be error (gRPC UNAVAILABLE) or store (the "
                                   "store's on_error answer), got \"{}\"",
                                   mode));
      }
      config.rls.unavailable_on_store_error = mode == "error";
    }
  }
  if (const YAML::Node store = root["store"]) {
    if (!store.IsMap()) return r.Error(store, "store must be a mapping");
    if (auto s = r.KnownKeys(store, "store", {"url", "prefix", "timeout", "on_error"}); !s.ok()) {
      return s;
    }
    if (store["url"]) {
      FG_ASSIGN(config.store.url, r.String(store["url"], "store.url"));
      config.store_url_given = true;
    }
    if (store["prefix"]) FG_ASSIGN(config.store.prefix, r.String(store["prefix"], "store.prefix"));
    if (store["timeout"]) {
      std::string timeout;
      FG_ASSIGN(timeout, r.String(store["timeout"], "store.timeout"));
      auto d = ParseDuration(timeout);
      if (!d.ok() || d->count() <= 0) {
        return r.Error(
            store["timeout"],
            fmt::format("store.timeout must be a duration like 50ms, got \"{}\"", timeout));
      }
      config.store.timeout = *d;
    }
    if (store["on_error"]) {
      std::string mode;
      FG_ASSIGN(mode, r.String(store["on_error"], "store.on_error"));
      if (mode == "fail_open") {
        config.store.on_error = OnError::kFailOpen;
      } else if (mode == "fail_closed") {
        config.store.on_error = OnError::kFailClosed;
      } else if (mode == "local") {
        config.store.on_error = OnError::kLocal;
      } else {
        return r.Error(
            store["on_error"],
            fmt::format("store.on_error must be fail_open, fail_closed or local, got \"{}\"",
                        mode));
      }
    }
    // With the options above folded in, as the store will be opened.
    if (config.store_url_given) {
      if (auto s = CheckStoreUrl(config.store.EffectiveUrl()); !s.ok()) {
        return r.Error(store["url"], fmt::format("store.url: {}", MessageOf(s)));
      }
    }
  }
  if (const YAML::Node proxies = root["trusted_proxies"]) {
    if (!proxies.IsSequence()) return r.Error(proxies, "trusted_proxies must be a list of CIDRs");
    for (const auto& p : proxies) {
      std::string text;
      FG_ASSIGN(text, r.String(p, "trusted_proxies[]"));
      auto net = ParseNetwork(text);
      if (!net.ok()) return r.Error(p, fmt::format("trusted_proxies: {}", MessageOf(net.status())));
      config.trusted_proxies.push_back(*net);
    }
  }
  if (root["authz_deny_status"]) {
    std::int64_t status = 0;
    FG_ASSIGN(status, r.Integer(root["authz_deny_status"], "authz_deny_status", 400, 499));
    if (status != 429 && status != 403) {
      return r.Error(root["authz_deny_status"], "authz_deny_status must be 429 or 403");
    }
    config.authz_deny_status = static_cast<int>(status);
  }
  if (root["max_waiting"]) {
    FG_ASSIGN(config.max_waiting, r.Integer(root["max_waiting"], "max_waiting", 1, kMaxMaxWaiting));
  }
  if (root["demo"]) FG_ASSIGN(config.demo, r.Bool(root["demo"], "demo"));
  if (root["shadow"]) FG_ASSIGN(config.shadow, r.Bool(root["shadow"], "shadow"));
  if (root["inline_policies"]) {
    FG_ASSIGN(config.inline_policies, r.Bool(root["inline_policies"], "inline_policies"));
  }
  if (const YAML::Node admin = root["admin"]) {
    if (!admin.IsMap()) return r.Error(admin, "admin must be a mapping");
    if (auto s = r.KnownKeys(admin, "admin", {"token_file"}); !s.ok()) return s;
    if (!admin["token_file"]) {
      return r.Error(admin, "admin needs token_file: the file holding the bearer token");
    }
    AdminSection section;
    FG_ASSIGN(section.token_file, r.String(admin["token_file"], "admin.token_file"));
    auto token = ReadAdminToken(section.token_file);
    if (!token.ok()) {
      return r.Error(admin["token_file"], fmt::format("admin.token_file {}: {}", section.token_file,
                                                      MessageOf(token.status())));
    }
    section.token = *std::move(token);
    config.admin = std::move(section);
  }
  if (const YAML::Node rules = root["rules"]) {
    if (!rules.IsSequence()) return r.Error(rules, "rules must be a list");
    if (rules.size() > kMaxRules) {
      return r.Error(rules, fmt::format("rules: {} rules; a config has at most {} "
                                        "(docs/security.md)",
                                        rules.size(), kMaxRules));
    }
    std::set<std::string> names;
    for (std::size_t i = 0; i < rules.size(); ++i) {
      auto rule = ParseRule(r, rules[i], fmt::format("rules[{}]", i));
      if (!rule.ok()) return rule.status();
      if (!names.insert(rule->name).second) {
        return r.Error(rules[i]["name"], fmt::format("rule name \"{}\" is used twice", rule->name));
      }
      config.rules.push_back(*std::move(rule));
    }
    if (auto s = CheckLimitsPerRequest(r, rules, config.rules); !s.ok()) return s;
  }
  return config;
}

absl::StatusOr<ServerConfig> LoadConfig(const std::string& path) {
  auto text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  return ParseConfig(*text, path);
}

}  // namespace floodgate::server

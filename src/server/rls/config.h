#pragma once

// envoyproxy/ratelimit's configuration, read unchanged, plus floodgate's opt-in extensions.
//
// docs/envoy.md, "Configuration". The extensions: algorithm, burst, refill, period, all_or_nothing.
// Parsed once, immutable, shared by the requests that use it while a reload swaps it.

#include <absl/container/flat_hash_map.h>
#include <absl/status/statusor.h>
#include <floodgate/policy.h>
#include <google/protobuf/struct.pb.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace floodgate::server::rls {

using Unit = ::envoy::service::ratelimit::v3::RateLimitResponse::RateLimit::Unit;

// SECOND 1 s ... WEEK 7 d, MONTH 30 d, YEAR 365 d, as upstream's UnitToDivider; nullopt
// for UNKNOWN.
std::optional<std::chrono::seconds> UnitLength(Unit unit);

// One `rate_limit` of a descriptor node (or a request's `limit` override).
struct RlsLimit {
  // Upstream's stats key: "domain.key_value.key2"; names the limit in metrics.
  std::string stats_key;
  std::uint32_t requests_per_unit = 0;
  // UNKNOWN when `period:` replaced `unit:` (floodgate's extension).
  Unit unit = ::envoy::service::ratelimit::v3::RateLimitResponse::RateLimit::UNKNOWN;
  std::string name;
  std::vector<std::string> replaces;
  bool unlimited = false;
  bool shadow = false;
  // The descriptor's `quota_mode` (upstream): an OVER_LIMIT of it answers the request
  // OVER_LIMIT only when every quota descriptor of the request is over, and no other is.
  bool quota = false;
  bool detailed_metric = false;
  // How floodgate decides it: fixed_window over the unit unless the rule opted into
  // another algorithm or period. Unset for `unlimited` and for requests_per_unit 0
  // (floodgate has no limit 0: the engine answers those without the store).
  std::optional<Policy> policy;
  // Upstream's defaults: fixed windows aligned to the epoch per unit, whose
  // duration_until_reset is whole seconds to the end of the window.
  bool upstream_window = true;
  // The window length: the unit's, or `period:`'s.
  std::chrono::microseconds period{0};
  // No floodgate extension (algorithm, period, burst, refill, prefetch): counted as upstream
  // counts, on its keys (docs/envoy.md, "Shared counters"), unless the domain is all_or_nothing.
  bool upstream_counter = false;
};

// A composite key holding '*' (anywhere, as upstream's config_impl.go takes them), split on
// '*' once at load: each '*' matches any run of bytes, the empty one included.
struct Wildcard {
  std::string key;
  std::vector<std::string> parts;
  // Upstream's wildcardMatch: the first part a prefix, the last a suffix, the middle ones in
  // order between them.
  bool Matches(std::string_view composite) const;
};

// A level of the descriptor tree: children by upstream's composite key ("key_value", or
// "key" for the key-only default), wildcard children ("key_pre*", "key_a*b") in file order.
struct DescriptorNode {
  absl::flat_hash_map<std::string, std::unique_ptr<DescriptorNode>> children;
  std::vector<Wildcard> wildcards;
  std::optional<RlsLimit> limit;
  // Upstream's `value_to_metric`: the request's value joins the stats key where this node
  // matched by default or wildcard (RlsMatch::value_to_metric_key).
  bool value_to_metric = false;
  // Upstream's `share_threshold` (a wildcard node only): every value the wildcard matches
  // counts on one counter, keyed by the pattern instead of the value.
  bool share_threshold = false;
  // Upstream's `metadata`: added to the answer's dynamic metadata (RESPONSE_DYNAMIC_METADATA)
  // when this node's limit is applied and passes. nullptr: none.
  std::shared_ptr<const google::protobuf::Struct> metadata;
};

// What upstream's GetLimit finds for one descriptor.
struct RlsMatch {
  const RlsLimit* limit = nullptr;  // nullptr: no limit
  // Per entry: the value that replaces the request's in the counter's key (share_threshold's
  // pattern, "files*"), or empty to keep the request's. Empty when no entry shares.
  std::vector<std::string> shared_values;
  // The node's metadata as upstream carries it to the answer (dropped where upstream's
  // GetLimit rebuilds the limit: detailed_metric on a leaf, or a value_to_metric key).
  const google::protobuf::Struct* metadata = nullptr;
  // Upstream's stats key with value_to_metric applied ("domain.key_value..."), for the stats;
  // empty when it is limit->stats_key (no value_to_metric applies: the common case, built
  // only when the config has a value_to_metric node).
  std::string value_to_metric_key;
};

struct RlsDomain {
  DescriptorNode root;
  // floodgate's extension (upstream's #1060): one request's descriptors decided all or
  // nothing, so a denial by one spends none of the others.
  bool all_or_nothing = false;
};

class RlsConfig {
 public:
  // The limit upstream's GetLimit finds for a descriptor, without the request's `limit`
  // override: nullptr for an unknown domain or no match. The limit comes from the node
  // the descriptor's last entry reaches.
  const RlsLimit* Find(
      std::string_view domain,
      const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& descriptor) const;
  // The same, with what share_threshold, metadata and value_to_metric add to the limit.
  RlsMatch Match(
      std::string_view domain,
      const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& descriptor) const;
  const RlsDomain* Domain(std::string_view domain) const;

  std::size_t domain_count() const { return domains_.size(); }
  // Whether any node says value_to_metric (RlsMatch::value_to_metric_key is built only then).
  bool uses_value_to_metric() const { return uses_value_to_metric_; }

  // Every limit, as upstream's /rlconfig prints it (its config Dump): one line per node with a
  // rate_limit, "<stats key>: unit=MINUTE requests_per_unit=3, shadow_mode: false, quota_mode:
  // false", depth first; domains and siblings sorted (upstream's come in Go map order).
  // Defined in rlconfig.cc.
  std::string Dump() const;

 private:
  friend class ConfigBuilder;
  absl::flat_hash_map<std::string, std::unique_ptr<RlsDomain>> domains_;
  bool uses_value_to_metric_ = false;
};

// One config file: its name in errors ("dir/config/a.yaml") and its text.
struct ConfigFile {
  std::string name;
  std::string text;
};

// How files combine: MERGE_DOMAIN_CONFIG.
enum class DomainFiles {
  kOneFileEach,  // upstream's default: a domain in a second file is an error
  kMerged,       // MERGE_DOMAIN_CONFIG=true: a later file's descriptors join the domain's
};

// Reads every file into one config, as upstream loads its runtime snapshot: each file is
// one domain (or, merged, adds to one); errors carry upstream's text, the file and the line
// ("a.yaml:7: invalid rate limit unit 'SECONDS'"), and floodgate's own messages for the
// extensions.
absl::StatusOr<std::shared_ptr<const RlsConfig>> ParseRlsConfig(
    const std::vector<ConfigFile>& files, DomainFiles domains = DomainFiles::kOneFileEach);

}  // namespace floodgate::server::rls

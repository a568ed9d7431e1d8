#pragma once

// envoyproxy/ratelimit's configuration, read unchanged, plus floodgate's opt-in extensions.
//
// docs/envoy.md, "Configuration". The extensions: algorithm, burst, refill, period, all_or_nothing.
// Parsed once, immutable, shared by the requests that use it while a reload swaps it.

#include <absl/container/flat_hash_map.h>
#include <absl/status/statusor.h>
#include <floodgate/policy.h>

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

// A level of the descriptor tree: children by upstream's composite key ("key_value", or
// "key" for the key-only default), wildcard children ("key_prefix*") in file order.
struct DescriptorNode {
  absl::flat_hash_map<std::string, std::unique_ptr<DescriptorNode>> children;
  std::vector<std::string> wildcard_keys;
  std::optional<RlsLimit> limit;
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
  const RlsDomain* Domain(std::string_view domain) const;

  std::size_t domain_count() const { return domains_.size(); }

  // Every limit, as upstream's /rlconfig prints it (its config Dump): one line per node with a
  // rate_limit, "<stats key>: unit=MINUTE requests_per_unit=3, shadow_mode: false, quota_mode:
  // false", depth first; domains and siblings sorted (upstream's come in Go map order).
  // Defined in rlconfig.cc.
  std::string Dump() const;

 private:
  friend class ConfigBuilder;
  absl::flat_hash_map<std::string, std::unique_ptr<RlsDomain>> domains_;
};

// One config file: its name in errors ("dir/config/a.yaml") and its text.
struct ConfigFile {
  std::string name;
  std::string text;
};

// Reads every file into one config, as upstream loads its runtime snapshot: each file is
// one domain; errors carry upstream's text, the file and the line ("a.yaml:7: invalid rate
// limit unit 'SECONDS'"), and floodgate's own messages for the extensions.
absl::StatusOr<std::shared_ptr<const RlsConfig>> ParseRlsConfig(
    const std::vector<ConfigFile>& files);

}  // namespace floodgate::server::rls

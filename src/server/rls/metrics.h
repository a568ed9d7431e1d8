#pragma once

// Counters of the rate limit service, as upstream keeps them (docs/envoy.md, "Metrics").
//
// Per limit, named by upstream's stats key ("domain.key_value.key2"): the hits counted, over the
// limit, within it, over in shadow mode, and answered degraded. A request's text joins the name
// for a `limit` override (its keys) and for `detailed_metric` rules (the last value, as upstream),
// so the series are bounded here: at most kMaxSeries names of at most kMaxNameBytes each, later
// names counted under kOtherSeries. The transport renders them on /metrics.

#include <absl/container/flat_hash_map.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>

namespace floodgate::server::rls {

class RlsMetrics {
 public:
  static constexpr std::size_t kMaxSeries = 10'000;
  static constexpr std::size_t kMaxNameBytes = 256;  // longer names are cut
  static constexpr std::string_view kOtherSeries = "_other";

  enum Counter : std::size_t {
    kTotalHits,
    kOverLimit,
    kWithinLimit,
    kShadowMode,
    kDegraded,
    // Upstream's counters only (docs/envoy.md, "Shared counters"): hits past NEAR_LIMIT_RATIO
    // of the limit, and over-limit hits answered from the local cache (LOCAL_CACHE_SIZE_IN_BYTES).
    kNearLimit,
    kOverLimitWithLocalCache,
    kCounterCount,
  };

  // Thread-safe.
  void Add(std::string_view stats_key, Counter counter, std::uint64_t hits);
  std::uint64_t Get(std::string_view stats_key, Counter counter) const;
  std::size_t series() const;  // names counted so far
  // Requests answered OK only because of the global SHADOW_MODE.
  void CountGlobalShadow() { global_shadow_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t global_shadow() const { return global_shadow_.load(std::memory_order_relaxed); }

  // Prometheus exposition lines, floodgate_rls_<counter>_total{key="..."}.
  std::string Render() const;

 private:
  using Counters = std::array<std::atomic<std::uint64_t>, kCounterCount>;
  mutable std::shared_mutex mu_;  // guards the map, not the counters
  absl::flat_hash_map<std::string, std::unique_ptr<Counters>> by_key_;
  std::atomic<std::uint64_t> global_shadow_{0};
};

}  // namespace floodgate::server::rls

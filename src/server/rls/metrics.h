#pragma once

// Counters of the rate limit service, as upstream keeps them (docs/envoy.md, "Metrics").
//
// Per limit, named by upstream's stats key ("domain.key_value.key2"): the hits counted, over the
// limit, near it, within it, over in shadow mode, over by the local cache, and answered degraded.
// A request's text joins the name for a `limit` override (its keys) and for `detailed_metric`
// rules (the last value, as upstream), so the series are bounded here: at most kMaxSeries names
// of at most kMaxNameBytes each, later names counted under kOtherSeries. Besides, the service's
// counters (upstream's `ratelimit.service.*`, `ratelimit_server.*`). The transport renders them
// on /metrics; upstream_stats.h sends them to upstream's sinks.
//
// Counting takes no lock: a name is found in a fixed open-addressing table of atomic pointers
// (inserted by CAS, never removed), its counters are atomics.

#include <absl/status/status.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace floodgate::server::rls {

// A Prometheus label value: backslash, quote and newline escaped.
std::string PrometheusLabelValue(std::string_view text);

class RlsMetrics {
 public:
  static constexpr std::size_t kMaxSeries = 10'000;
  static constexpr std::size_t kMaxNameBytes = 256;  // longer names are cut
  static constexpr std::string_view kOtherSeries = "_other";
  // Upstream's NEAR_LIMIT_RATIO default.
  static constexpr float kDefaultNearLimitRatio = 0.8F;

  enum Counter : std::size_t {
    kTotalHits,
    kOverLimit,
    kNearLimit,
    kWithinLimit,
    kShadowMode,
    kOverLimitWithLocalCache,
    kDegraded,
    kDomainNotFound,  // named by the domain alone: a request's domain no config has
    kCounterCount,
  };
  // Upstream's names of the counters (`total_hits`...); kDegraded is floodgate's own.
  static std::string_view CounterName(Counter counter);

  // What one limit's decision was, for upstream's arithmetic (base_limiter.go).
  struct Outcome {
    std::uint64_t hits = 1;
    std::uint64_t limit = 0;   // requests_per_unit
    std::uint64_t before = 0;  // counted in the window before these hits
    bool over = false;
    bool shadow = false;       // the limit is in shadow mode
    bool local_cache = false;  // denied by the local over-limit cache
    bool degraded = false;     // answered by the store's on_error
  };

  explicit RlsMetrics(float near_limit_ratio = kDefaultNearLimitRatio);
  ~RlsMetrics();
  RlsMetrics(const RlsMetrics&) = delete;
  RlsMetrics& operator=(const RlsMetrics&) = delete;

  // Thread-safe, lock-free. One decision of the limit named `stats_key`, counted as upstream
  // counts it: total_hits all hits; over_limit the hits past the limit (all of them when the
  // window was already full); near_limit those between the ratio's threshold and the limit;
  // within_limit all hits of an OK; shadow_mode the over hits of a shadow limit.
  void Count(std::string_view stats_key, const Outcome& outcome);
  void Add(std::string_view stats_key, Counter counter, std::uint64_t hits);
  std::uint64_t Get(std::string_view stats_key, Counter counter) const;
  std::size_t series() const;  // names counted so far, kOtherSeries included once used

  // The service's counters, upstream's `ratelimit.service.*` and `ratelimit_server.*`.
  enum Service : std::size_t {
    kGlobalShadow,  // requests answered OK only because of the global SHADOW_MODE
    kRedisError,    // answers failed by the store
    kServiceError,  // answers refused for the request (empty domain...) or no config
    kGrpcRequests,  // gRPC ShouldRateLimit calls
    kServiceCount,
  };
  void CountService(Service counter) { service_[counter].fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t service(Service counter) const {
    return service_[counter].load(std::memory_order_relaxed);
  }
  void CountGlobalShadow() { CountService(kGlobalShadow); }
  std::uint64_t global_shadow() const { return service(kGlobalShadow); }
  // A failed answer: a store failure (marked by MarkStoreFailure) or a refused request.
  void CountFailure(const absl::Status& status);
  static absl::Status MarkStoreFailure(absl::Status status);

  // gRPC response times in whole milliseconds, as upstream's timer (values past the last bucket
  // go there). Drained by the stats flush: each call returns the counts since the last.
  static constexpr std::size_t kTimeBuckets = 10'000;
  void CountResponseTime(std::chrono::nanoseconds elapsed);
  void DrainResponseTimes(const std::function<void(std::uint64_t ms, std::uint64_t n)>& each);

  // Every series' counters (order unspecified), for the sinks.
  using Values = std::array<std::uint64_t, kCounterCount>;
  void ForEach(const std::function<void(std::string_view name, const Values&)>& each) const;

  // Prometheus exposition lines, floodgate_rls_<counter>_total{key="..."}.
  std::string Render() const;

 private:
  struct Series;
  static constexpr std::size_t kSlots = 16'384;  // a power of two; kMaxSeries fills 61%
  Series* Find(std::string_view name) const;
  Series* FindOrInsert(std::string_view name);

  const float near_limit_ratio_;
  std::unique_ptr<std::atomic<Series*>[]> slots_;
  std::atomic<std::size_t> size_{0};
  std::array<std::atomic<std::uint64_t>, kServiceCount> service_{};
  std::unique_ptr<std::atomic<std::uint64_t>[]> times_;
};

}  // namespace floodgate::server::rls

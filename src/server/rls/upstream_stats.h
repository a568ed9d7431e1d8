#pragma once

// Upstream's stats: the RLS counters under upstream's names, flushed to upstream's sinks.
//
// docs/envoy.md, "Stats". As envoyproxy/ratelimit's gostats store (lyft/gostats v0.4.14): every
// STATS_FLUSH_INTERVAL the counters that moved are sent as deltas, named
// `ratelimit.service.rate_limit.<stats key>.<counter>`, `ratelimit.service.<counter>`,
// `ratelimit.service.call.should_rate_limit.<error>` and `ratelimit_server.ShouldRateLimit.*`,
// EXTRA_TAGS serialized into the name as gostats does (`.__key=value`). The sink is one of
// upstream's: statsd (TCP or UDP), DogStatsD, Prometheus (stats_sinks.h, prometheus_sink.h),
// the logging sink (stderr, upstream's default) or none (DISABLE_STATS).

#include <absl/container/flat_hash_map.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "server/rls/engine.h"
#include "server/rls/metrics.h"

namespace floodgate::server::rls {

// Where upstream's stats go (runner.go's choice).
enum class StatsSinkKind { kLogging, kNone, kStatsd, kDogStatsd, kPrometheus };
enum class StatsTransport { kTcp, kUdp };  // STATSD_PROTOCOL

// A DogStatsD mogrifier (USE_DOG_STATSD_MOGRIFIERS, DOG_STATSD_MOGRIFIER_<NAME>_*): a name that
// matches `pattern` (RE2, as Go's regexp) is renamed to `name` and tagged, `$N` the N-th match.
struct Mogrifier {
  std::string pattern;
  std::string name;
  std::vector<std::pair<std::string, std::string>> tags;
};

struct StatsSettings {
  StatsSinkKind sink = StatsSinkKind::kLogging;
  std::string host = "localhost";  // STATSD_HOST
  std::uint16_t port = 8125;       // STATSD_PORT
  StatsTransport transport = StatsTransport::kTcp;
  std::vector<std::pair<std::string, std::string>> tags;  // EXTRA_TAGS
  std::chrono::nanoseconds flush_interval{std::chrono::seconds(10)};
  // Prometheus: PROMETHEUS_ADDR (host may be empty: every address), PROMETHEUS_PATH,
  // PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS.
  std::string prometheus_host;
  std::uint16_t prometheus_port = 9090;
  std::string prometheus_path = "/metrics";
  bool response_time_as_ms = false;
  std::vector<Mogrifier> mogrifiers;
  std::vector<std::string> dogstatsd_tags;  // DD_ENTITY_ID, DD_ENV, DD_SERVICE, DD_VERSION
};

// gostats' Sink: what a flush hands over. Called from the flushing thread only.
class StatsSink {
 public:
  virtual ~StatsSink() = default;
  virtual void Counter(std::string_view name, std::uint64_t delta) = 0;
  virtual void Gauge(std::string_view name, std::uint64_t value) = 0;
  virtual void Timer(std::string_view name, double milliseconds) = 0;
  virtual void Flush() {}
};

// Upstream's SanitizeStatName: ':' and '|' to '_', the dots of IPv4 addresses to '_'.
std::string SanitizeStatName(std::string_view name);
// gostats' name with tags: `name.__k1=v1.__k2=v2`, sorted by key, empty keys or values left out,
// '.', ':' and '|' of values as '_'.
std::string SerializeTags(std::string_view name,
                          const std::vector<std::pair<std::string, std::string>>& tags);

// The counters of `metrics` (and the config loads) flushed to a sink every flush_interval.
class UpstreamStats {
 public:
  // `metrics` outlives this; `loads` is called from the flushing thread; `sink` may be null
  // (DISABLE_STATS: nothing is sent).
  using Loads = std::function<Engine::ConfigLoads()>;
  UpstreamStats(const StatsSettings& settings, RlsMetrics& metrics, Loads loads,
                std::unique_ptr<StatsSink> sink);
  ~UpstreamStats();  // stops the flushes (after a last one)
  UpstreamStats(const UpstreamStats&) = delete;
  UpstreamStats& operator=(const UpstreamStats&) = delete;

  // Starts the flushing thread.
  void Start();
  // One flush now (what the thread does each interval). Not concurrent with the thread's own:
  // for tests that run no thread.
  void FlushNow();

  // Upstream's debug `/stats` is Go's expvar; floodgate's prints every counter by its
  // upstream name, `name: value` a line, sorted.
  static std::string StatsPage(const RlsMetrics& metrics, const Engine::ConfigLoads& loads,
                               const std::vector<std::pair<std::string, std::string>>& tags);

 private:
  void Run();

  const std::chrono::nanoseconds interval_;
  const std::vector<std::pair<std::string, std::string>> tags_;
  RlsMetrics& metrics_;
  const Loads loads_;
  std::unique_ptr<StatsSink> sink_;
  std::mutex flush_mu_;  // one flush at a time (the thread's, or a test's)
  // What was sent last, per upstream name (gostats' lastSentValue): bounded by the series.
  absl::flat_hash_map<std::string, std::uint64_t> sent_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

// The engine as upstream's gRPC interceptor sees it: each call counted
// (`ratelimit_server.ShouldRateLimit.total_requests`) and timed (`.response_time`, whole
// milliseconds). Only the gRPC server is given it: upstream's `/json` is not counted there.
class GrpcCallStats final : public Engine {
 public:
  // `engine` and `metrics` outlive this.
  GrpcCallStats(Engine& engine, RlsMetrics& metrics) : engine_(engine), metrics_(metrics) {}
  void ShouldRateLimit(const pb::RateLimitRequest& request, pb::RateLimitResponse* response,
                       RlsDone done) override;
  std::shared_ptr<const RlsConfig> CurrentConfig() const override {
    return engine_.CurrentConfig();
  }

 private:
  Engine& engine_;
  RlsMetrics& metrics_;
};

}  // namespace floodgate::server::rls

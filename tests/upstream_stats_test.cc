// Upstream's stats without a process: the counters' arithmetic, names and tags, the flushes'
// deltas, DogStatsD's lines, the Prometheus mapping and its text, the settings' refusals.
#include "server/rls/upstream_stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "server/rls/metrics.h"
#include "server/rls/prometheus_sink.h"
#include "server/rls/stats_sinks.h"
#include "server/rls/upstream_mode.h"

namespace floodgate::server::rls {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// What a flush handed over, in order.
class RecordingSink final : public StatsSink {
 public:
  explicit RecordingSink(std::vector<std::string>& lines) : lines_(lines) {}
  void Counter(std::string_view name, std::uint64_t delta) override {
    lines_.push_back(std::string(name) + ":" + std::to_string(delta) + "|c");
  }
  void Gauge(std::string_view name, std::uint64_t value) override {
    lines_.push_back(std::string(name) + ":" + std::to_string(value) + "|g");
  }
  void Timer(std::string_view name, double ms) override {
    lines_.push_back(std::string(name) + ":" + std::to_string(static_cast<int>(ms)) + "|ms");
  }
  void Flush() override { lines_.push_back("flush"); }

 private:
  std::vector<std::string>& lines_;
};

// base_limiter.go's arithmetic, case by case: a limit of 10, near from 8 (0.8).
TEST(UpstreamStatsCounting, OverAndNearLimitAreThePortionsPastEachThreshold) {
  RlsMetrics metrics;
  const auto count = [&](std::uint64_t before, std::uint64_t hits, bool over) {
    metrics.Count("d.k", {.hits = hits, .limit = 10, .before = before, .over = over});
  };
  count(0, 7, false);  // 7: below near
  EXPECT_EQ(metrics.Get("d.k", RlsMetrics::kNearLimit), 0u);
  count(7, 2, false);  // 9: one past near (8)
  EXPECT_EQ(metrics.Get("d.k", RlsMetrics::kNearLimit), 1u);
  count(9, 3, true);  // 12: 2 over, 1 near (9 -> 10)
  EXPECT_EQ(metrics.Get("d.k", RlsMetrics::kOverLimit), 2u);
  EXPECT_EQ(metrics.Get("d.k", RlsMetrics::kNearLimit), 2u);
  count(10, 4, true);  // the window was full: every hit over
  EXPECT_EQ(metrics.Get("d.k", RlsMetrics::kOverLimit), 6u);
  EXPECT_EQ(metrics.Get("d.k", RlsMetrics::kTotalHits), 16u);
  EXPECT_EQ(metrics.Get("d.k", RlsMetrics::kWithinLimit), 9u);
  metrics.Count("d.s", {.hits = 3, .limit = 10, .before = 9, .over = true, .shadow = true});
  EXPECT_EQ(metrics.Get("d.s", RlsMetrics::kShadowMode), 2u);
  metrics.Count("d.c", {.hits = 2, .limit = 10, .before = 0, .over = true, .local_cache = true});
  EXPECT_EQ(metrics.Get("d.c", RlsMetrics::kOverLimitWithLocalCache), 2u);
  EXPECT_EQ(metrics.Get("d.c", RlsMetrics::kOverLimit), 2u);
}

// Counting takes no lock: threads inserting the same and new names at once count every hit,
// and the series stay within the bound.
TEST(UpstreamStatsCounting, ConcurrentInsertsCountEveryHitWithinTheBound) {
  RlsMetrics metrics;
  constexpr int kThreads = 4;
  constexpr int kNames = 3'000;  // 4 x 3,000 distinct names: past the 10,000 bound
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics, t] {
      for (int i = 0; i < kNames; ++i) {
        metrics.Add("shared", RlsMetrics::kTotalHits, 1);
        metrics.Add("t" + std::to_string(t) + "." + std::to_string(i), RlsMetrics::kTotalHits, 1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(metrics.Get("shared", RlsMetrics::kTotalHits), std::uint64_t{kThreads * kNames});
  EXPECT_EQ(metrics.series(), RlsMetrics::kMaxSeries + 1);
  std::uint64_t all = 0;
  metrics.ForEach([&](std::string_view name, const RlsMetrics::Values& values) {
    if (name != "shared") all += values[RlsMetrics::kTotalHits];
  });
  EXPECT_EQ(all, std::uint64_t{kThreads * kNames}) << "names past the bound count as _other";
}

TEST(UpstreamStatsNames, SanitizedAsUpstreamAndTaggedAsGostats) {
  EXPECT_EQ(SanitizeStatName("d.remote_address_10.0.0.1"), "d.remote_address_10_0_0_1");
  EXPECT_EQ(SanitizeStatName("d.path_/a:b|c"), "d.path_/a_b_c");
  // Leftmost-first, as Go's regexp: 1234.5.6.7 is 1 then the address 234.5.6.7.
  EXPECT_EQ(SanitizeStatName("d.k_1234.5.6.7.8"), "d.k_1234_5_6_7.8");
  EXPECT_EQ(SerializeTags("a.b", {{"zone", "eu.1"}, {"env", "prod"}, {"", "x"}, {"y", ""}}),
            "a.b.__env=prod.__zone=eu_1");
  EXPECT_EQ(SerializeTags("a", {{"k", "1"}, {"k", "2"}}), "a.__k=2") << "a map: the last value";
}

TEST(UpstreamStatsFlush, SendsTheDeltasOfWhatMovedUnderUpstreamsNames) {
  RlsMetrics metrics;
  std::vector<std::string> lines;
  StatsSettings settings;
  settings.tags = {{"env", "prod"}};
  UpstreamStats stats(
      settings, metrics, [] { return Engine::ConfigLoads{.success = 1}; },
      std::make_unique<RecordingSink>(lines));
  metrics.Count("rl.source_cluster_proxy", {.hits = 1, .limit = 3, .before = 0});
  metrics.CountResponseTime(std::chrono::microseconds(2'400));
  metrics.CountFailure(RlsMetrics::MarkStoreFailure(absl::UnavailableError("down")));
  stats.FlushNow();
  std::sort(lines.begin(), lines.end());
  EXPECT_THAT(
      lines, ElementsAre(
                 "flush", "ratelimit.service.call.should_rate_limit.redis_error.__env=prod:1|c",
                 "ratelimit.service.config_load_success.__env=prod:1|c",
                 "ratelimit.service.rate_limit.rl.source_cluster_proxy.total_hits.__env=prod:1|c",
                 "ratelimit.service.rate_limit.rl.source_cluster_proxy.within_limit.__env=prod:1|c",
                 "ratelimit_server.ShouldRateLimit.response_time.__env=prod:2|ms"));
  lines.clear();
  metrics.Count("rl.source_cluster_proxy", {.hits = 2, .limit = 3, .before = 1});
  stats.FlushNow();
  std::sort(lines.begin(), lines.end());
  EXPECT_THAT(
      lines,
      ElementsAre(
          "flush", "ratelimit.service.rate_limit.rl.source_cluster_proxy.near_limit.__env=prod:1|c",
          "ratelimit.service.rate_limit.rl.source_cluster_proxy.total_hits.__env=prod:2|c",
          "ratelimit.service.rate_limit.rl.source_cluster_proxy.within_limit.__env=prod:2|c"))
      << "deltas only, and only what moved";
}

TEST(UpstreamStatsDogStatsd, TagsSplitOffAndMogrified) {
  StatsSettings settings;
  settings.dogstatsd_tags = {"env:prod"};
  EXPECT_EQ(DogStatsdLine("ratelimit.service.config_load_success.__app=rl", "1|c", settings),
            "ratelimit.service.config_load_success:1|c|#env:prod,app:rl");
  settings.mogrifiers = {{.pattern = R"(^ratelimit\.service\.rate_limit\.(.*)\.(.*)\.(.*)$)",
                          .name = "ratelimit.service.rate_limit.$3",
                          .tags = {{"domain", "$1"}, {"descriptor", "$2"}, {"x", "$9"}}}};
  EXPECT_EQ(DogStatsdLine("ratelimit.service.rate_limit.rl.k_v.total_hits", "3|c", settings),
            "ratelimit.service.rate_limit.total_hits:3|c|#env:prod,domain:rl,descriptor:k_v,x:$9");
}

TEST(UpstreamStatsPrometheus, MappedAsUpstreamsDefaultMapper) {
  const auto mapped = [](std::string_view name, StatsdType type = StatsdType::kCounter) {
    const MappedMetric m = MapStatsdName(name, type);
    std::string out = m.name;
    for (const auto& [k, v] : m.labels) out += " " + k + "=" + v;
    return out;
  };
  EXPECT_EQ(mapped("ratelimit.service.rate_limit.rl.remote_address.total_hits"),
            "ratelimit_service_rate_limit_total_hits domain=rl key1=remote_address");
  EXPECT_EQ(mapped("ratelimit.service.rate_limit.rl.a_1.b_2.c.over_limit"),
            "ratelimit_service_rate_limit_over_limit domain=rl key1=a_1 key2=b_2");
  EXPECT_EQ(mapped("ratelimit.service.call.should_rate_limit.redis_error"),
            "ratelimit_service_should_rate_limit_error err_type=redis_error");
  EXPECT_EQ(mapped("ratelimit.service.config_load_success"),
            "ratelimit_service_config_load_success");
  EXPECT_EQ(mapped("ratelimit_server.ShouldRateLimit.total_requests"),
            "ratelimit_service_total_requests grpc_method=ShouldRateLimit");
  EXPECT_EQ(mapped("ratelimit.service.global_shadow_mode"), "ratelimit_service_global_shadow_mode");
  // Upstream's own quirks, kept: the cache's counter is not mapped for one key, and is taken
  // for over_limit by the regular expression for two.
  EXPECT_EQ(mapped("ratelimit.service.rate_limit.rl.k.over_limit_with_local_cache"),
            "ratelimit_service_rate_limit_rl_k_over_limit_with_local_cache");
  EXPECT_EQ(mapped("ratelimit.service.rate_limit.rl.a.b.over_limit_with_local_cache"),
            "ratelimit_service_rate_limit_over_limit domain=rl key1=a key2=b");

  PrometheusRegistry registry(false);
  registry.Counter("ratelimit.service.rate_limit.rl.k.total_hits", 2);
  registry.Counter("ratelimit.service.rate_limit.rl.k.total_hits", 1'999'998);
  registry.Counter("ratelimit.service.rate_limit.rl.a.b.total_hits", 1);  // other labels: dropped
  registry.Timer("ratelimit_server.ShouldRateLimit.response_time", 7);
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE ratelimit_service_rate_limit_total_hits counter\n"
                              "ratelimit_service_rate_limit_total_hits{domain=\"rl\",key1=\"k\"} "
                              "2e+06\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("key2")));
  EXPECT_THAT(text, HasSubstr("ratelimit_service_response_time_seconds_bucket{grpc_method="
                              "\"ShouldRateLimit\",le=\"0.005\"} 0\n"
                              "ratelimit_service_response_time_seconds_bucket{grpc_method="
                              "\"ShouldRateLimit\",le=\"0.01\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("ratelimit_service_response_time_seconds_sum{grpc_method="
                              "\"ShouldRateLimit\"} 0.007\n"));
}

absl::StatusOr<StatsSettings> StatsOf(const Environment& environment) {
  auto env = UpstreamEnv::Read(environment, UpstreamVariables());
  if (!env.ok()) return env.status();
  return StatsSettingsFrom(*env);
}

TEST(UpstreamStatsSettings, OneSinkAtATimeAndTheDefaultsAreUpstreams) {
  const auto defaults = StatsOf({});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->sink, StatsSinkKind::kStatsd) << "USE_STATSD is true by default";
  EXPECT_EQ(defaults->transport, StatsTransport::kTcp);
  EXPECT_EQ(defaults->host, "localhost");
  EXPECT_EQ(defaults->port, 8125);
  EXPECT_EQ(defaults->flush_interval, std::chrono::seconds(10));
  const auto logging = StatsOf({{"USE_STATSD", "false"}});
  ASSERT_TRUE(logging.ok());
  EXPECT_EQ(logging->sink, StatsSinkKind::kLogging);
  const auto two = StatsOf({{"USE_PROMETHEUS", "true"}});
  ASSERT_FALSE(two.ok());
  EXPECT_THAT(std::string(two.status().message()), HasSubstr("more than one stats sink"));
  const auto disabled = StatsOf({{"USE_PROMETHEUS", "true"}, {"DISABLE_STATS", "true"}});
  ASSERT_TRUE(disabled.ok()) << "DISABLE_STATS comes first, as runner.go's switch";
  EXPECT_EQ(disabled->sink, StatsSinkKind::kNone);
  const auto prometheus = StatsOf(
      {{"USE_STATSD", "false"}, {"USE_PROMETHEUS", "true"}, {"PROMETHEUS_ADDR", "[::1]:9102"}});
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  EXPECT_EQ(prometheus->prometheus_host, "::1");
  EXPECT_EQ(prometheus->prometheus_port, 9102);
  const auto dog = StatsOf({{"USE_STATSD", "false"},
                            {"USE_DOG_STATSD", "true"},
                            {"DD_SERVICE", "rl"},
                            {"DD_ENTITY_ID", "pod"},
                            {"USE_DOG_STATSD_MOGRIFIERS", "x"},
                            {"DOG_STATSD_MOGRIFIER_X_PATTERN", "("},
                            {"DOG_STATSD_MOGRIFIER_X_NAME", "n"}});
  ASSERT_FALSE(dog.ok());
  EXPECT_THAT(std::string(dog.status().message()),
              HasSubstr("DOG_STATSD_MOGRIFIER_X_PATTERN=\"(\": failed to compile pattern"));
  const auto tagged = StatsOf({{"USE_STATSD", "false"},
                               {"USE_DOG_STATSD", "true"},
                               {"DD_SERVICE", "rl"},
                               {"DD_ENTITY_ID", "pod"}});
  ASSERT_TRUE(tagged.ok()) << tagged.status();
  EXPECT_THAT(tagged->dogstatsd_tags, ElementsAre("dd.internal.entity_id:pod", "service:rl"));
}

}  // namespace
}  // namespace floodgate::server::rls

// envoyproxy/ratelimit's counters (docs/envoy.md, "Shared counters"): its keys, TTLs, near_limit,
// local cache, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT and per-second store, on memory:// with a
// fixed clock and on real redis-servers (a server and a cluster), keys and TTLs read back with
// redis-cli. The fleet of upstream's model and floodgate's two modes is tests/rls/fleet_test.py.

#include <floodgate/memory_store.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <future>
#include <optional>
#include <string>

#include "hang_guard.h"
#include "redis_server.h"
#include "rls_request.h"
#include "server/rls/config.h"
#include "server/rls/rls_engine.h"
#include "server/rls/upstream_counter.h"
#include "store/redis/cluster.h"

namespace floodgate::server::rls {
namespace {

using Response = pb::RateLimitResponse;
using ::floodgate::testing::RlsRequest;

// 2026-01-01T00:00:00.250Z; the window starts: the second, the minute and the day's are its
// whole second.
constexpr std::int64_t kStartS = 1'767'225'600;
constexpr TimePoint kStart{std::chrono::microseconds(kStartS * 1'000'000 + 250'000)};

TEST(UpstreamCounter, KeyIsUpstreamsByteForByte) {
  pb::RateLimitRequest request = RlsRequest("dom", {{{{"a", "1"}, {"b", "x_y"}}}});
  EXPECT_EQ(CounterKey("pre:", "dom", request.descriptors(0), kStartS + 59, 60),
            fmt::format("pre:dom_a_1_b_x_y_{}", kStartS));
  EXPECT_EQ(CounterKey("", "dom", request.descriptors(0), kStartS + 61, 60),
            fmt::format("dom_a_1_b_x_y_{}", kStartS + 60));
  // No escaping: a value with braces hashes on its tag in a cluster, as upstream's does.
  request = RlsRequest("d", {{{{"k", "{tag}"}}}});
  EXPECT_EQ(CounterKey("", "d", request.descriptors(0), 5, 1), "d_k_{tag}_5");
}

TEST(UpstreamCounter, TtlIsTheUnitPlusJitterBelowTheMax) {
  EXPECT_EQ(CounterTtl(60, 0, 0.99), 60);
  EXPECT_EQ(CounterTtl(60, 300, 0.0), 60);
  EXPECT_EQ(CounterTtl(60, 300, 0.5), 210);
  EXPECT_EQ(CounterTtl(60, 300, 0.999999999), 359);  // Int63n(300) < 300
}

TEST(UpstreamCounter, HitsToAddAsGetHitsAddend) {
  EXPECT_EQ(HitsToAdd(false, 3, true, true, false), 3u);  // off: always the hits
  EXPECT_EQ(HitsToAdd(true, 3, true, false, false), 0u);  // a key over in the local cache
  EXPECT_EQ(HitsToAdd(true, 3, false, false, false), 3u);
  EXPECT_EQ(HitsToAdd(true, 3, false, true, true), 3u);  // the key that goes over counts on
  EXPECT_EQ(HitsToAdd(true, 3, false, true, false), 0u);  // the others are spared
}

TEST(UpstreamCounter, JudgeCountsAsBaseLimiter) {
  // limit 10, ratio 0.8: near from 8.
  CountVerdict v = Judge(10, 7, 7, false, false, 0.8f);
  EXPECT_FALSE(v.over);
  EXPECT_EQ(v.remaining, 3u);
  EXPECT_EQ(v.within_limit, 7u);
  EXPECT_EQ(v.near_limit, 0u);
  v = Judge(10, 9, 2, false, false, 0.8f);  // 7 -> 9: one hit past 8
  EXPECT_EQ(v.near_limit, 1u);
  EXPECT_EQ(v.within_limit, 2u);
  v = Judge(10, 12, 3, false, false, 0.8f);  // 9 -> 12: 2 over, 1 near
  EXPECT_TRUE(v.over);
  EXPECT_EQ(v.remaining, 0u);
  EXPECT_EQ(v.over_limit, 2u);
  EXPECT_EQ(v.near_limit, 1u);
  EXPECT_TRUE(v.cache_locally);
  v = Judge(10, 15, 3, false, true, 0.8f);  // 12 -> 15: all over, in shadow mode
  EXPECT_EQ(v.over_limit, 3u);
  EXPECT_EQ(v.shadow_mode, 3u);
  v = Judge(10, 0, 4, true, false, 0.8f);  // the local cache
  EXPECT_TRUE(v.over);
  EXPECT_EQ(v.over_limit, 4u);
  EXPECT_EQ(v.over_limit_with_local_cache, 4u);
  EXPECT_FALSE(v.cache_locally);
}

constexpr const char* kConfig = R"(domain: d
descriptors:
  - key: one
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: ten
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: sec
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: gcra
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: gcra}
  - key: period
    rate_limit: {period: 1m, requests_per_unit: 1}
)";

class CountersTest : public ::testing::Test {
 protected:
  void Start(RlsSettings settings = {}, Store* per_second = nullptr) {
    auto config = ParseRlsConfig({{"d.yaml", kConfig}});
    ASSERT_TRUE(config.ok()) << config.status();
    engine_.reset();
    metrics_.emplace(settings.near_limit_ratio);  // as ServeEngine makes it
    engine_ = std::make_unique<RlsEngine>(
        store_, std::move(settings), *config, *metrics_,
        [this] { return std::optional<TimePoint>(now_); }, per_second);
  }
  Response Ask(const pb::RateLimitRequest& request) {
    Response response;
    std::optional<absl::Status> result;
    engine_->ShouldRateLimit(request, &response, [&](absl::Status s) { result = s; });
    EXPECT_TRUE(result.has_value() && result->ok()) << (result ? result->ToString() : "none");
    return response;
  }
  std::int64_t CountOf(Store& store, const std::string& key) {
    auto count = store.Count(CountRequest{.key = key, .hits = 0, .ttl = {}, .now = now_});
    EXPECT_TRUE(count.ok()) << count.status();
    return count.ok() ? count->count : -1;
  }
  std::uint64_t Stat(std::string_view key, RlsMetrics::Counter counter) {
    return metrics_->Get(key, counter);
  }

  MemoryStore store_;
  std::optional<RlsMetrics> metrics_;
  TimePoint now_ = kStart;
  std::unique_ptr<RlsEngine> engine_;
};

TEST_F(CountersTest, RulesWithoutExtensionsCountOnUpstreamsKeys) {
  RlsSettings settings;
  settings.cache_key_prefix = "p_";
  Start(settings);
  for (int i = 0; i < 3; ++i) Ask(RlsRequest("d", {{{{"ten", "x"}}, 2}}));
  EXPECT_EQ(CountOf(store_, fmt::format("p_d_ten_x_{}", kStartS)), 6);
  const Response over = Ask(RlsRequest("d", {{{{"one", "x"}}, 3}}));
  EXPECT_EQ(over.overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(over.statuses(0).duration_until_reset().seconds(), 60);
  // Over the limit counts on, as INCRBY does.
  EXPECT_EQ(CountOf(store_, fmt::format("p_d_one_x_{}", kStartS)), 3);
  // The next window is the next key.
  now_ += std::chrono::minutes(1);
  EXPECT_EQ(Ask(RlsRequest("d", {{{{"one", "x"}}}})).overall_code(), Response::OK);
  EXPECT_EQ(CountOf(store_, fmt::format("p_d_one_x_{}", kStartS + 60)), 1);
}

TEST_F(CountersTest, ExtensionsKeepFloodgatesKeys) {
  Start();
  Ask(RlsRequest("d", {{{{"gcra", "x"}}}}));
  EXPECT_EQ(Ask(RlsRequest("d", {{{{"gcra", "x"}}}})).overall_code(), Response::OVER_LIMIT);
  Ask(RlsRequest("d", {{{{"period", "x"}}}}));
  EXPECT_EQ(Ask(RlsRequest("d", {{{{"period", "x"}}}})).overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(CountOf(store_, fmt::format("d_gcra_x_{}", kStartS)), 0);
  EXPECT_EQ(CountOf(store_, fmt::format("d_period_x_{}", kStartS)), 0);
}

TEST_F(CountersTest, NearLimitRatioMarksNearHits) {
  RlsSettings settings;
  settings.near_limit_ratio = 0.5f;
  Start(settings);
  Ask(RlsRequest("d", {{{{"ten", "x"}}, 4}}));  // 0 -> 4: below 5
  EXPECT_EQ(Stat("d.ten", RlsMetrics::kNearLimit), 0u);
  Ask(RlsRequest("d", {{{{"ten", "x"}}, 3}}));  // 4 -> 7: 2 past 5
  EXPECT_EQ(Stat("d.ten", RlsMetrics::kNearLimit), 2u);
  EXPECT_EQ(Stat("d.ten", RlsMetrics::kWithinLimit), 7u);
  Ask(RlsRequest("d", {{{{"ten", "x"}}, 5}}));  // 7 -> 12: 2 over, 3 near
  EXPECT_EQ(Stat("d.ten", RlsMetrics::kOverLimit), 2u);
  EXPECT_EQ(Stat("d.ten", RlsMetrics::kNearLimit), 5u);
}

TEST_F(CountersTest, LocalCacheAnswersOverWithoutTheStoreForTheUnit) {
  RlsSettings settings;
  settings.local_cache_bytes = 4096;
  Start(settings);
  const std::string key = fmt::format("d_one_x_{}", kStartS);
  Ask(RlsRequest("d", {{{{"one", "x"}}}}));
  EXPECT_EQ(Ask(RlsRequest("d", {{{{"one", "x"}}}})).overall_code(), Response::OVER_LIMIT);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Ask(RlsRequest("d", {{{{"one", "x"}}}})).overall_code(), Response::OVER_LIMIT);
  }
  EXPECT_EQ(CountOf(store_, key), 2);  // the three were not sent
  EXPECT_EQ(Stat("d.one", RlsMetrics::kOverLimitWithLocalCache), 3u);
  EXPECT_EQ(Stat("d.one", RlsMetrics::kOverLimit), 4u);
  now_ += std::chrono::minutes(1);
  EXPECT_EQ(Ask(RlsRequest("d", {{{{"one", "x"}}}})).overall_code(), Response::OK);
}

TEST_F(CountersTest, LocalCacheIsBoundedByItsBytes) {
  LocalCache cache(3 * (10 + LocalCache::kEntryBytes));
  for (int i = 0; i < 100; ++i) cache.Insert(fmt::format("key-{:06}", i), 1000, 0);
  EXPECT_LE(cache.used_bytes(), 3 * (10 + LocalCache::kEntryBytes));
  EXPECT_TRUE(cache.Contains("key-000099", 0));
  EXPECT_FALSE(cache.Contains("key-000099", 1000));  // its unit has passed
  LocalCache off(0);
  off.Insert("k", 1000, 0);
  EXPECT_FALSE(off.Contains("k", 0));
}

TEST_F(CountersTest, StopIncrementSparesTheOtherKeysOfAnOverRequest) {
  const auto run = [&](bool stop) {
    RlsSettings settings;
    settings.stop_increment_when_over = stop;
    settings.cache_key_prefix = stop ? "stop_" : "on_";
    Start(settings);
    const auto both = RlsRequest("d", {{{{"one", "x"}}}, {{{"ten", "x"}}}});
    Ask(both);  // one: 1, ten: 1
    EXPECT_EQ(Ask(both).overall_code(), Response::OVER_LIMIT);
    return std::pair{CountOf(store_, settings.cache_key_prefix + fmt::format("d_one_x_{}", kStartS)),
                     CountOf(store_, settings.cache_key_prefix + fmt::format("d_ten_x_{}", kStartS))};
  };
  EXPECT_EQ(run(false), std::pair(std::int64_t{2}, std::int64_t{2}));
  // The key going over is incremented, the other spared (fixed_cache_impl.go's getHitsAddend).
  EXPECT_EQ(run(true), std::pair(std::int64_t{2}, std::int64_t{1}));
}

TEST_F(CountersTest, SecondLimitsCountOnThePerSecondStore) {
  MemoryStore per_second;
  Start({}, &per_second);
  Ask(RlsRequest("d", {{{{"sec", "x"}}}, {{{"ten", "x"}}}}));
  EXPECT_EQ(CountOf(per_second, fmt::format("d_sec_x_{}", kStartS)), 1);
  EXPECT_EQ(CountOf(store_, fmt::format("d_sec_x_{}", kStartS)), 0);
  EXPECT_EQ(CountOf(store_, fmt::format("d_ten_x_{}", kStartS)), 1);
  EXPECT_EQ(CountOf(per_second, fmt::format("d_ten_x_{}", kStartS)), 0);
}

// Counters of upstream's longest keys stay within max_bytes (besides the policies' states).
TEST(StoreCount, CountersAreBoundedByMaxBytes) {
  MemoryStoreOptions options;
  options.max_bytes = 16 * 4 * (kMaxCounterKeyBytes + 64);  // 4 of the longest per lock
  MemoryStore store(options);
  for (int i = 0; i < 1000; ++i) {
    std::string key = fmt::format("{:06}", i);
    key.resize(kMaxCounterKeyBytes, 'k');
    ASSERT_TRUE(store.Count(CountRequest{.key = key, .ttl = std::chrono::seconds(60)}).ok());
  }
  EXPECT_LE(store.bytes(), options.max_bytes);
  EXPECT_GT(store.Stats().evictions, 0u);
}

TEST(StoreCount, RefusesWhatIsNotBounded) {
  MemoryStore store;
  EXPECT_FALSE(store.Count(CountRequest{.key = ""}).ok());
  const std::string long_key(kMaxCounterKeyBytes + 1, 'k');
  EXPECT_FALSE(store.Count(CountRequest{.key = long_key}).ok());
  EXPECT_FALSE(store.Count(CountRequest{.key = "k", .hits = kMaxCost + 1}).ok());
  EXPECT_FALSE(
      store.Count(CountRequest{.key = "k", .ttl = kMaxCounterTtl + std::chrono::seconds(1)}).ok());
  EXPECT_FALSE(store.Count(CountRequest{.key = "k", .hits = -1}).ok());
}

// On Redis: the key upstream's replicas read, its count and its TTL (unit + jitter), read back
// with redis-cli; on a server and on a cluster (each key on its own slot's node).
void CheckOnRedis(Store& store, const std::function<std::string(const std::vector<std::string>&,
                                                                 const std::string&)>& cli) {
  auto config = ParseRlsConfig({{"d.yaml", kConfig}});
  ASSERT_TRUE(config.ok()) << config.status();
  RlsMetrics metrics;
  RlsSettings settings;
  settings.cache_key_prefix = "up_";
  settings.expiration_jitter_max_seconds = 30;
  RlsEngine engine(store, settings, *config, metrics);
  const std::int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                                 SystemNow().time_since_epoch())
                                 .count();
  for (const std::string user : {"a", "b", "c", "d"}) {
    auto done = std::make_shared<std::promise<absl::Status>>();
    auto response = std::make_shared<Response>();
    engine.ShouldRateLimit(RlsRequest("d", {{{{"ten", user}}, 3}}), response.get(),
                           [done, response](absl::Status s) { done->set_value(s); });
    auto future = done->get_future();
    ASSERT_EQ(future.wait_for(floodgate::testing::kHangGuard), std::future_status::ready);
    ASSERT_TRUE(future.get().ok());
    EXPECT_EQ(response->statuses(0).limit_remaining(), 7u);
    // A minute's window: the test's own clock agrees unless it crossed a minute meanwhile.
    const std::string key = fmt::format("up_d_ten_{}_{}", user, (now_s / 60) * 60);
    const std::string later = fmt::format("up_d_ten_{}_{}", user, (now_s / 60) * 60 + 60);
    std::string count = cli({"GET", key}, key);
    const std::string& found = count == "\n" || count.empty() ? later : key;
    if (&found == &later) count = cli({"GET", later}, later);
    EXPECT_EQ(count, "3\n") << found;
    const int ttl = std::stoi(cli({"TTL", found}, found));
    EXPECT_GE(ttl, 58) << found;
    EXPECT_LE(ttl, 60 + 29) << found;
  }
}

TEST(CountersOnRedis, UpstreamsKeysCountsAndTtlsOnOneServer) {
  auto server = floodgate::testing::RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto store = floodgate::testing::OpenRedis(server->url("timeout=60s"));
  ASSERT_NE(store, nullptr);
  CheckOnRedis(*store, [&](const std::vector<std::string>& args, const std::string&) {
    return server->Cli(args);
  });
  store->Close();
}

TEST(CountersOnRedis, UpstreamsKeysOnTheirSlotsNodesInACluster) {
  auto* cluster = floodgate::testing::RedisCluster::Shared();
  ASSERT_NE(cluster, nullptr);
  auto store = floodgate::testing::OpenRedis(cluster->url("timeout=60s"));
  ASSERT_NE(store, nullptr);
  CheckOnRedis(*store, [&](const std::vector<std::string>& args, const std::string& key) {
    floodgate::testing::RedisServer* node = cluster->PrimaryOf(redis::SlotOf(key));
    return node == nullptr ? std::string() : node->Cli(args);
  });
  store->Close();
}

}  // namespace
}  // namespace floodgate::server::rls

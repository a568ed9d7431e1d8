// The Redis store on a real Redis Cluster (3 primaries + 3 replicas, created by redis-cli).
//
// Slot routing checked against the servers, the conformance vectors spread over every primary,
// exact counts under contention, a primary killed under load, and slots migrated while decisions
// run.
#include <floodgate/redis_store.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <future>
#include <latch>
#include <map>
#include <mutex>
#include <optional>
#include <semaphore>
#include <sstream>
#include <thread>

#include "conformance.h"
#include "core/state_kind.h"
#include "redis_server.h"
#include "redis_test_fixture.h"
#include "server/metrics.h"
#include "store/redis/cluster.h"
#include "store/redis/lua_sources.h"
#include "store/redis/resp.h"
#include "store/redis/store_testing.h"

namespace floodgate::testing {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using Steady = std::chrono::steady_clock;

// The most decisions a load thread makes (it is bounded in count and in time).
constexpr std::size_t kLoadMax = 10'000'000;

// The key floodgate stores for `key` under fixed_window with prefix "fg:".
std::string FixedWindowKey(const std::string& key) { return "fg:fw:" + key; }

// ---- routing rules, without a cluster ------------------------------------------------

// TryStartClusterNode's contract, on which the callers that pick their own ports again
// rely (redis_serve_test.cc): a port taken since it was picked answers nullptr, fails
// nothing, and leaves the server that holds the port running.
TEST(ClusterNodes, TryStartOnATakenPortAnswersNullWithoutAFailure) {
  auto holder = RedisServer::Start();
  ASSERT_NE(holder, nullptr);
  const auto node = RedisServer::TryStartClusterNode(holder->port());
  EXPECT_EQ(node, nullptr);
  EXPECT_FALSE(::testing::Test::HasFailure()) << "a failed try is the caller's to handle";
  EXPECT_EQ(holder->Command({"PING"}), "PONG\n");
  auto started = RedisServer::TryStartClusterNode(0);
  ASSERT_NE(started, nullptr) << "a free port starts a node";
  EXPECT_THAT(started->Command({"INFO", "cluster"}), ::testing::HasSubstr("cluster_enabled:1"));
}

TEST(ClusterRules, SlotOfFollowsTheClusterSpec) {
  // The cluster specification's own example: CRC16("123456789") = 0x31C3.
  EXPECT_EQ(redis::SlotOf("123456789"), 0x31C3);
  EXPECT_EQ(redis::SlotOf("{user1000}.following"), redis::SlotOf("{user1000}.followers"));
  EXPECT_EQ(redis::SlotOf("x{user1000}y"), redis::SlotOf("user1000"));
  EXPECT_EQ(redis::SlotOf("foo{}{bar}"), redis::SlotOf(std::string("foo{}{bar}")));
  EXPECT_EQ(redis::SlotOf("foo{{bar}}zap"), redis::SlotOf("{bar"));
}

TEST(ClusterRules, ParsesRedirects) {
  auto moved = redis::ParseRedirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->kind, redis::Redirect::Kind::kMoved);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->target, (RedisEndpoint{"127.0.0.1", 6381}));
  auto ask = redis::ParseRedirect("ASK 1 [::1]:7000");
  ASSERT_TRUE(ask.has_value());
  EXPECT_EQ(ask->kind, redis::Redirect::Kind::kAsk);
  EXPECT_EQ(ask->target, (RedisEndpoint{"::1", 7000}));
  auto unknown = redis::ParseRedirect("MOVED 7 :6381");
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(unknown->target, (RedisEndpoint{"", 6381}));  // the host that answered
  for (const char* bad : {"MOVED", "MOVED x 1.2.3.4:5", "MOVED 16384 a:1", "ASK 1 host",
                          "ASK 1 host:0", "ERR MOVED 1 a:1", "TRYAGAIN"}) {
    EXPECT_FALSE(redis::ParseRedirect(bad).has_value()) << bad;
  }
}

// CLUSTER SLOTS as a server sends it, endpoints of every kind Redis may announce.
TEST(ClusterRules, ParsesClusterSlots) {
  redis::ReplyReader reader;
  const std::string reply =
      "*4\r\n"
      "*3\r\n:0\r\n:99\r\n*3\r\n$9\r\n127.0.0.2\r\n:7000\r\n$2\r\nid\r\n"
      "*3\r\n:100\r\n:199\r\n*3\r\n$0\r\n\r\n:7001\r\n$2\r\nid\r\n"   // empty: asked host
      "*3\r\n:200\r\n:299\r\n*3\r\n$-1\r\n:7002\r\n$2\r\nid\r\n"      // NULL: asked host
      "*4\r\n:300\r\n:399\r\n*3\r\n$1\r\n?\r\n:7003\r\n$2\r\nid\r\n"  // unknown: unserved
      "*3\r\n$9\r\n127.0.0.9\r\n:7009\r\n$2\r\nid\r\n";               // (a replica)
  ASSERT_TRUE(reader.Feed(reply.data(), reply.size()).ok());
  auto parsed = reader.Next();
  ASSERT_TRUE(parsed.ok() && *parsed != nullptr) << parsed.status();
  auto ranges = redis::ParseClusterSlots(**parsed, "10.1.1.1");
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  ASSERT_EQ(ranges->size(), 3u);
  EXPECT_EQ((*ranges)[0].primary, (RedisEndpoint{"127.0.0.2", 7000}));
  EXPECT_EQ((*ranges)[1].primary, (RedisEndpoint{"10.1.1.1", 7001}));
  EXPECT_EQ((*ranges)[2].primary, (RedisEndpoint{"10.1.1.1", 7002}));
  EXPECT_EQ((*ranges)[2].first, 200);
  EXPECT_EQ((*ranges)[2].last, 299);
}

TEST(ClusterRules, ClusterUrls) {
  auto o = RedisStoreOptions::FromUrl("redis-cluster://u:p@10.0.0.1:7000,[::1]:7001,h?timeout=1s");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->cluster);
  ASSERT_EQ(o->seeds.size(), 3u);
  EXPECT_EQ(o->seeds[1], (RedisEndpoint{"::1", 7001}));
  EXPECT_EQ(o->seeds[2], (RedisEndpoint{"h", 6379}));
  EXPECT_EQ(o->connections_per_server(), 1);  // one per primary unless connections= says
  EXPECT_EQ(RedisStoreOptions::FromUrl("redis-cluster://h:1?connections=3")->connections_per_server(),
            3);
  EXPECT_EQ(o->timeout, milliseconds(1000));
  EXPECT_EQ(o->Describe(), "redis-cluster://u:***@10.0.0.1:7000,[::1]:7001,h:6379?timeout=1s");
  auto db = RedisStoreOptions::FromUrl("redis-cluster://h:1/2");
  ASSERT_FALSE(db.ok());
  EXPECT_THAT(std::string(db.status().message()), HasSubstr("only database 0"));
  EXPECT_FALSE(RedisStoreOptions::FromUrl("redis-cluster://").ok());
  EXPECT_FALSE(RedisStoreOptions::FromUrl("redis-cluster://h:1,h:99999").ok());
}

TEST(ClusterRules, AStandaloneServerIsNotACluster) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto options = RedisStoreOptions::FromUrl(
      fmt::format("redis-cluster://127.0.0.1:{}?connect_timeout=2s", server->port()));
  ASSERT_TRUE(options.ok());
  auto store = RedisStore::Open(*options);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("cluster"));
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("redis://"));
}

// ---- on a cluster ----------------------------------------------------------------------

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = RedisCluster::Shared();
    ASSERT_NE(cluster_, nullptr);
  }
  RedisCluster* cluster_ = nullptr;
};

TEST_F(ClusterTest, SlotsAgreeWithTheServers) {
  for (const std::string key :
       {"a", "fg:gcra:user-1", "{tag}x", "x{tag}", "{}x", "a{b}c{d}", "}{", "{{x}}", ""}) {
    const std::string said = cluster_->nodes()[0]->Cli({"CLUSTER", "KEYSLOT", key});
    EXPECT_EQ(std::atoi(said.c_str()), redis::SlotOf(key)) << key;
  }
  for (int i = 0; i < 300; ++i) {
    const std::string key = fmt::format("fg:fw:client-{}", i * 7919);
    const std::string said = cluster_->nodes()[1]->Cli({"CLUSTER", "KEYSLOT", key});
    ASSERT_EQ(std::atoi(said.c_str()), redis::SlotOf(key)) << key;
  }
}

// gcra in whole µs: a same-instant burst admits exactly B on every primary, batched
// within a slot (a burst is one key).
// lua/node_batch.lua reads every key before it writes any: a key of another node fails the
// call with nothing written; keys of several slots of its own node are decided.
TEST_F(ClusterTest, ANodesBatchWritesNothingWhenAKeyIsAnotherNodes) {
  const auto key = [](int i) { return fmt::format("fg:gcra:nb-{}", i); };
  RedisServer* node = cluster_->PrimaryOf(redis::SlotOf(key(0)));
  ASSERT_NE(node, nullptr);
  std::string same_node, other_node;  // the first key's node, another slot; another node
  for (int i = 1; same_node.empty() || other_node.empty(); ++i) {
    const int slot = redis::SlotOf(key(i));
    if (cluster_->PrimaryOf(slot) != node) {
      if (other_node.empty()) other_node = key(i);
    } else if (slot != redis::SlotOf(key(0)) && same_node.empty()) {
      same_node = key(i);
    }
  }
  const std::string path = ::testing::TempDir() + "node_batch.lua";
  std::ofstream(path) << redis::lua::NodeBatchScript();
  std::string sha =
      RunShell(fmt::format("redis-cli -h 127.0.0.1 -p {} -x SCRIPT LOAD < {}", node->port(), path));
  while (!sha.empty() && (sha.back() == '\n' || sha.back() == '\r')) sha.pop_back();
  ASSERT_EQ(sha.size(), 40u) << sha;
  // Two gcra decisions, 10/h (a key then lives 6 min, not the 100 ms of 10/s, gone before
  // a loaded machine's redis-cli looks): KEYS = {the first key}, ARGV = {2, slot marks, the
  // second key, the batch's arguments}.
  const auto call = [&](const std::string& second) {
    return node->Cli({"EVALSHA", sha, "1", key(0), "2", "11", second, "1", "gcra", "10",
                      "3600000000", "10", "0", "1", "", "1", "1", "", "1"});
  };
  EXPECT_THAT(call(other_node), HasSubstr("Script attempted to access a non local key"));
  EXPECT_EQ(node->Cli({"EXISTS", key(0)}).substr(0, 1), "0");
  const std::string decided = call(same_node);
  EXPECT_THAT(decided, ::testing::Not(HasSubstr("ERR"))) << decided;
  EXPECT_EQ(node->Cli({"EXISTS", key(0)}).substr(0, 1), "1");
  EXPECT_EQ(node->Cli({"EXISTS", same_node}).substr(0, 1), "1");
}

// Decisions in flight on keys all over the cluster, each key several times, queued while
// the primaries hold the first calls: batched per node where the servers know script
// flags (this Redis 7), per slot where they do not (forced here, as a Redis < 7.0 is
// found); either way a key's decisions go in order, each seeing the one before.
TEST_F(ClusterTest, BatchesSpanANodesSlotsWithScriptFlagsElseOneSlot) {
  const Policy policy = *Policy::Parse("fixed_window:1000/1h");
  for (const std::optional<redis::Batching> forced :
       {std::optional<redis::Batching>(), std::optional(redis::Batching::kPerSlot)}) {
    auto options = RedisStoreOptions::FromUrl(
        cluster_->url("batch=64&connections=1&timeout=60s&denial_cache=0us"));
    ASSERT_TRUE(options.ok());
    auto store = redis::StoreTesting::Open(*options, forced);
    ASSERT_TRUE(store.ok()) << store.status();
    const std::string prefix = forced ? "slot:" : "node:";
    constexpr int kKeys = 400, kTimes = 4;
    std::vector<std::int64_t> remaining(kKeys * kTimes, -1);
    std::latch answered(kKeys * kTimes);
    std::optional<PausedWrites> paused(std::in_place, cluster_->Primaries());
    for (int t = 0; t < kTimes; ++t) {
      for (int k = 0; k < kKeys; ++k) {
        (*store)->DecideAsync({fmt::format("{}{}", prefix, k), policy, 1, std::nullopt},
                              [&, at = k * kTimes + t](absl::StatusOr<Decision> d) {
                                if (d.ok() && d->allowed && !d->degraded) {
                                  remaining[at] = d->remaining;
                                }
                                answered.count_down();
                              });
      }
    }
    paused.reset();
    answered.wait();
    for (int k = 0; k < kKeys; ++k) {
      for (int t = 0; t < kTimes; ++t) {
        ASSERT_EQ(remaining[k * kTimes + t], policy.limit - 1 - t) << prefix << k << " #" << t;
      }
    }
    const RedisStats stats = (*store)->redis_stats();
    if (forced) {
      EXPECT_EQ(stats.node_batches, 0u);
    } else {
      EXPECT_GT(stats.node_batches, 0u);
    }
    EXPECT_EQ(stats.node_batch_retries, 0u);
    EXPECT_EQ(stats.node_batch_refusals, 0u);  // Redis 7 takes the flagged script
    std::printf("%s %d decisions in %llu calls (%llu over several slots of a node)\n",
                forced ? "per slot (forced):" : "per node (detected):", kKeys * kTimes,
                static_cast<unsigned long long>(stats.calls),
                static_cast<unsigned long long>(stats.node_batches));
  }
}

TEST_F(ClusterTest, SameInstantGcraBurstsAdmitExactlyB) {
  auto store = OpenRedis(cluster_->url("batch=64&connections=1&timeout=60s&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const std::size_t decisions = ExpectSameInstantGcraBurstsAdmitExactlyB(
      *store, "burst:", HoldingScriptCalls(cluster_->Primaries()));
  // All but the few that went before the primaries held the calls.
  EXPECT_GE(store->redis_stats().batched_decisions, decisions * 9 / 10) << decisions;
  EXPECT_EQ(store->redis_stats().degraded, 0u);
}

TEST_F(ClusterTest, ConformanceVectorsPassSpreadOverEveryPrimary) {
  auto store = OpenRedis(cluster_->url("batch=1&timeout=60s"));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->redis_stats().nodes, 3u);
  const auto cases = LoadAllVectors();
  ASSERT_GE(cases.size(), 60u);
  for (std::size_t i = 0; i < cases.size(); ++i) RunCase(*store, cases[i], fmt::format("c{}:", i));

  // The same, every step of a case in flight at once: batched within a slot.
  auto batched = OpenRedis(cluster_->url("batch=16&connections=1&timeout=60s"));
  ASSERT_NE(batched, nullptr);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    RunCaseInFlight(*batched, cases[c], fmt::format("b{}:", c));
  }
  EXPECT_EQ(store->redis_stats().degraded + batched->redis_stats().degraded, 0u);

  // Every primary holds a fair share of the keys written.
  const std::vector<RedisServer*> primaries = cluster_->Primaries();
  ASSERT_EQ(primaries.size(), 3u);
  std::map<int, std::int64_t> keys_on;
  std::int64_t total = 0;
  for (RedisServer* primary : primaries) {
    keys_on[primary->port()] = std::atoll(primary->Cli({"DBSIZE"}).c_str());
    total += keys_on[primary->port()];
  }
  EXPECT_GT(total, 100);
  for (const auto& [port, keys] : keys_on) {
    EXPECT_GT(keys, total / 6) << "primary on port " << port << " holds too few of the keys";
  }
  std::printf("keys written per primary:");
  for (const auto& [port, keys] : keys_on) std::printf(" %lld", static_cast<long long>(keys));
  std::printf("\n");
}

// Every case in flight at once, queued while the primaries hold the first calls: batches
// span the slots of a node (lua/node_batch.lua), and each case's decisions still see the
// ones before.
TEST_F(ClusterTest, ConformanceVectorsPassInBatchesOverANodesSlots) {
  auto store = OpenRedis(cluster_->url("batch=64&connections=1&timeout=60s&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const auto cases = LoadAllVectors();
  ASSERT_GE(cases.size(), 60u);
  RunCasesInFlight(*store, cases, "n", HoldingScriptCalls(cluster_->Primaries()));
  EXPECT_EQ(store->redis_stats().degraded, 0u);
  EXPECT_GT(store->redis_stats().node_batches, 0u);
  std::printf("node batches: %llu of %llu calls\n",
              static_cast<unsigned long long>(store->redis_stats().node_batches),
              static_cast<unsigned long long>(store->redis_stats().calls));
}

// docs/reservations.md on a cluster: each record lives on its limit key's slot, so every
// vector passes with keys spread over the primaries.
TEST_F(ClusterTest, ReservationVectorsAcrossPrimaries) {
  auto store = OpenRedis(cluster_->url("timeout=60s&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const auto cases = LoadReserveVectors();
  for (std::size_t c = 0; c < cases.size(); ++c) {
    for (int spread = 0; spread < 3; ++spread) {
      RunReserveCase(*store, cases[c], fmt::format("r{}.{}:", c, spread));
    }
  }
  EXPECT_EQ(store->redis_stats().errors, 0u);
}

// docs/multi.md on a cluster: every multi vector with all its keys on one slot (a hash
// tag: one script call), and again with its keys spread over slots (reserved slot by slot,
// released when a later one denies); delay.json's across slots are refused.
TEST_F(ClusterTest, MultiVectorsOnOneSlotAndAcrossSlots) {
  auto store = OpenRedis(cluster_->url("timeout=60s&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const auto cases = LoadMultiVectors();
  for (std::size_t c = 0; c < cases.size(); ++c) {
    RunMultiCase(*store, cases[c], fmt::format("{{m{}}}", c));
  }
  EXPECT_EQ(store->redis_stats().cross_slot, 0u);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    if (cases[c].file == "delay.json") {
      // Under delay= every item is charged at the latest start, known only once every slot
      // answered: refused across slots (src/store/redis/cross_slot.cc), nothing charged.
      const absl::Status status = FirstMultiStepStatus(*store, cases[c], fmt::format("x{}:", c));
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << cases[c].name << status;
      EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("one Cluster slot"));
      continue;
    }
    RunMultiCase(*store, cases[c], fmt::format("x{}:", c));
  }
  EXPECT_GT(store->redis_stats().cross_slot, 0u);
  EXPECT_EQ(store->redis_stats().release_failures, 0u);
}

// Two keys whose slots come in a known order: a request is reserved on the first slot and
// denied on the second, so the reservation is given back, and nothing of it remains.
TEST_F(ClusterTest, AReservationDeniedOnALaterSlotIsGivenBack) {
  auto store = OpenRedis(cluster_->url("timeout=60s&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  // "daily" on a lower slot than "burst": reserved first.
  std::string daily, burst;
  for (int i = 0; daily.empty(); ++i) {
    const std::string d = fmt::format("client{}:daily", i), b = fmt::format("client{}:burst", i);
    if (redis::SlotOf("fg:fw:" + d) < redis::SlotOf("fg:gcra:" + b)) daily = d, burst = b;
  }
  const Policy per_second = *Policy::Parse("gcra:2/1s,burst=2");
  const Policy per_day = *Policy::Parse("fixed_window:5/1d");
  const std::vector<CheckItem> items = {{daily, per_day, 1, "daily"},
                                        {burst, per_second, 1, "burst"}};
  const TimePoint now{std::chrono::microseconds(1'700'000'000'000'000)};
  for (int i = 0; i < 5; ++i) {
    auto d = store->DecideAll({items, now});
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->allowed, i < 2) << i;
    // The daily limit was reserved, then given back: its peek shows what was really spent.
    EXPECT_EQ(d->items[0].remaining, i < 2 ? 4 - i : 3) << i;
  }
  EXPECT_EQ(store->redis_stats().releases, 3u);
  EXPECT_EQ(store->redis_stats().release_failures, 0u);
  const std::vector<CheckItem> peek = {{daily, per_day, 0}};
  EXPECT_EQ(store->DecideAll({peek, now})->items[0].remaining, 3);
}

// The same with calendar windows (tz=): the release finds the window the units were
// admitted in among the calendar bounds the store sends (lua/common.lua
// calendar_window_of), for a fixed and a sliding window on the 23-hour day in New York.
TEST_F(ClusterTest, ACalendarReservationDeniedOnALaterSlotIsGivenBack) {
  auto store = OpenRedis(cluster_->url("timeout=60s&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy per_second = *Policy::Parse("gcra:2/1s,burst=2");
  // 2028-03-12T12:00-04:00.
  const TimePoint now{std::chrono::microseconds(1'836'489'600'000'000)};
  for (const char* text : {"fixed_window:5/1d,tz=America/New_York",
                           "sliding_window:5/1d,tz=America/New_York"}) {
    const Policy per_day = *Policy::Parse(text);
    const std::string tag(core::KeyTag(core::KindOf(per_day)));
    // "daily" on a lower slot than "burst": reserved first.
    std::string daily, burst;
    for (int i = 0; daily.empty(); ++i) {
      const std::string d = fmt::format("cal-{}{}:daily", tag, i);
      const std::string b = fmt::format("cal-{}{}:burst", tag, i);
      if (redis::SlotOf("fg:" + tag + ":" + d) < redis::SlotOf("fg:gcra:" + b)) {
        daily = d, burst = b;
      }
    }
    const std::uint64_t releases = store->redis_stats().releases;
    const std::vector<CheckItem> items = {{daily, per_day, 1, "daily"},
                                          {burst, per_second, 1, "burst"}};
    for (int i = 0; i < 5; ++i) {
      auto d = store->DecideAll({items, now});
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(d->allowed, i < 2) << text << " " << i;
      EXPECT_EQ(d->items[0].remaining, i < 2 ? 4 - i : 3) << text << " " << i;
    }
    EXPECT_EQ(store->redis_stats().releases - releases, 3u) << text;
    const std::vector<CheckItem> peek = {{daily, per_day, 0}};
    EXPECT_EQ(store->DecideAll({peek, now})->items[0].remaining, 3) << text;
  }
  EXPECT_EQ(store->redis_stats().release_failures, 0u);
}

// Two stacked limits on different slots, hammered from many threads: never more than the
// tighter one admits; once quiet, the counters hold exactly what was admitted (every
// reservation a later slot denied was given back), and the capacity left is usable.
TEST_F(ClusterTest, AcrossSlotsNeverOverAdmitsAndLeavesNothingReserved) {
  auto store = OpenRedis(cluster_->url("timeout=60s&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy tight = *Policy::Parse("fixed_window:500/1h");
  const Policy loose = *Policy::Parse("fixed_window:800/1h");
  std::string a, b;  // on different slots
  for (int i = 0; a.empty(); ++i) {
    const std::string x = fmt::format("t{}", i), y = fmt::format("l{}", i);
    if (redis::SlotOf("fg:fw:" + x) != redis::SlotOf("fg:fw:" + y)) a = x, b = y;
  }
  const std::vector<CheckItem> items = {{a, tight}, {b, loose}};
  const TimePoint now{std::chrono::microseconds(1'700'000'000'000'000)};
  std::atomic<std::int64_t> admitted{0}, failed{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        std::counting_semaphore<64> slots(64);
        for (int i = 0; i < 400; ++i) {
          slots.acquire();
          store->DecideAllAsync({items, now}, [&](absl::StatusOr<MultiDecision> d) {
            if (!d.ok() || d->degraded) {
              ++failed;
            } else {
              admitted += d->allowed;
            }
            slots.release();
          });
        }
        for (int i = 0; i < 64; ++i) slots.acquire();
      });
    }
  }
  EXPECT_EQ(failed.load(), 0);
  EXPECT_LE(admitted.load(), 500);
  EXPECT_GT(admitted.load(), 0);
  const std::vector<CheckItem> peek = {{a, tight, 0}, {b, loose, 0}};
  auto left = store->DecideAll({peek, now});
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->items[0].remaining, 500 - admitted.load());
  EXPECT_EQ(left->items[1].remaining, 800 - admitted.load());
  std::printf("across slots: %lld of 1600 admitted under a limit of 500 (%llu releases)\n",
              static_cast<long long>(admitted.load()),
              static_cast<unsigned long long>(store->redis_stats().releases));
}

// Many threads, many decisions in flight on one key per policy: exactly the capacity.
TEST_F(ClusterTest, EveryAlgorithmAdmitsExactlyItsCapacityUnderContention) {
  auto store = OpenRedis(cluster_->url("timeout=60s&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  ExpectExactCapacityUnderContention(*store);
}

TEST_F(ClusterTest, LeasesInAMultiDecisionAreExactUnderContention) {
  auto store = OpenRedis(cluster_->url("timeout=60s&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  ExpectExactLeasesUnderContention(*store, "{one slot}");  // and across slots:
  ExpectExactLeasesUnderContention(*store, "spread:");
}

// Every primary loses its scripts (a restart or failover does that): decisions carry on,
// resent with the script body, none degraded.
TEST_F(ClusterTest, ScriptsLostOnEveryPrimaryAreReloadedInvisibly) {
  auto store = OpenRedis(cluster_->url("timeout=60s"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("gcra:100/1s");
  for (int i = 0; i < 50; ++i)
    ASSERT_FALSE(store->Decide({fmt::format("k{}", i), policy, 1, std::nullopt})->degraded);
  for (RedisServer* primary : cluster_->Primaries()) {
    EXPECT_THAT(primary->Cli({"SCRIPT", "FLUSH"}), HasSubstr("OK"));
  }
  for (int i = 0; i < 50; ++i) {
    auto d = store->Decide({fmt::format("k{}", i), policy, 1, std::nullopt});
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_FALSE(d->degraded);
  }
  EXPECT_GE(store->redis_stats().noscript_reloads, 3u);  // at least once per primary
  EXPECT_EQ(store->redis_stats().degraded, 0u);
}

// Keys whose slots live on `primary` and keys elsewhere.
std::pair<std::vector<std::string>, std::vector<std::string>> KeysOnAndOff(RedisCluster& cluster,
                                                                           int primary_port,
                                                                           int per_side) {
  std::vector<std::string> on, off;
  std::map<int, int> owner_of_slot;
  for (int i = 0; on.size() < std::size_t(per_side) || off.size() < std::size_t(per_side); ++i) {
    const std::string key = fmt::format("client-{}", i);
    const int slot = redis::SlotOf(FixedWindowKey(key));
    if (!owner_of_slot.contains(slot)) owner_of_slot[slot] = cluster.PrimaryOf(slot)->port();
    auto& side = owner_of_slot[slot] == primary_port ? on : off;
    if (side.size() < std::size_t(per_side)) side.push_back(key);
  }
  return {on, off};
}

TEST_F(ClusterTest, AKilledPrimaryDegradesOnlyItsKeysThenRecoversAfterFailover) {
  // A killed primary resets its connections: its keys degrade at once, whatever the
  // timeout, which is only a guard for the other primaries' keys.
  auto store = OpenRedis(cluster_->url("timeout=60s&on_error=fail_closed&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:1000000/1h");
  RedisServer* victim = cluster_->PrimaryOf(redis::SlotOf(FixedWindowKey("client-0")));
  ASSERT_NE(victim, nullptr);
  const int victim_port = victim->port();
  const auto sides = KeysOnAndOff(*cluster_, victim_port, 8);
  const std::vector<std::string>& on = sides.first;  // lambdas below capture these
  const std::vector<std::string>& off = sides.second;

  // Load on both sides, from two threads, for as long as the test needs (bounded).
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> on_degraded{0}, off_degraded{0}, off_answered{0};
  const auto load = [&](const std::vector<std::string>& keys, std::atomic<std::int64_t>& degraded,
                        std::atomic<std::int64_t>* answered) {
    const auto deadline = Steady::now() + 4 * kHangGuard;
    for (std::size_t i = 0; !stop && i < kLoadMax && Steady::now() < deadline; ++i) {
      auto d = store->Decide({keys[i % keys.size()], policy, 1, std::nullopt});
      ASSERT_TRUE(d.ok()) << d.status();
      if (d->degraded) {
        ++degraded;
        EXPECT_FALSE(d->allowed) << "on_error=fail_closed denies";
      } else if (answered != nullptr) {
        ++*answered;
      }
    }
  };
  std::jthread on_side([&] { load(on, on_degraded, nullptr); });
  std::jthread off_side([&] { load(off, off_degraded, &off_answered); });

  ASSERT_TRUE(TimeUntilRedisAnswers(*store, on[0], policy, kHangGuard).has_value());
  RedisServer* replica = cluster_->ReplicaOf(*victim);
  ASSERT_NE(replica, nullptr);
  victim->Kill();
  const auto killed_at = Steady::now();
  // Its keys degrade as on_error says...
  const auto degraded_by = Steady::now() + kHangGuard;
  while (on_degraded == 0 && Steady::now() < degraded_by) std::this_thread::yield();
  EXPECT_GT(on_degraded.load(), 0);
  // ...until its replica, told to take over (the nodes would take the victim for failed
  // only after the node timeout, a minute here), is promoted and found, without
  // restarting anything.
  EXPECT_EQ(replica->Cli({"CLUSTER", "FAILOVER", "TAKEOVER"}), "OK\n");
  EXPECT_TRUE(TimeUntilRedisAnswers(*store, on[0], policy, kHangGuard).has_value());
  std::printf("answers from Redis again %lld ms after the primary was killed\n",
              static_cast<long long>(
                  std::chrono::duration_cast<milliseconds>(Steady::now() - killed_at).count()));
  for (const auto& key : on) {
    EXPECT_TRUE(TimeUntilRedisAnswers(*store, key, policy, kHangGuard).has_value()) << key;
  }
  stop = true;
  on_side.join();
  off_side.join();
  // The other primaries' keys never noticed.
  EXPECT_EQ(off_degraded.load(), 0);
  EXPECT_GT(off_answered.load(), 0);
  RedisServer* promoted = cluster_->PrimaryOf(redis::SlotOf(FixedWindowKey(on[0])));
  ASSERT_NE(promoted, nullptr);
  EXPECT_NE(promoted->port(), victim_port);
  EXPECT_GT(store->redis_stats().topology_refreshes, 1u);
}

// A primary that stops answering (its script calls held): its keys get on_error's answer
// (here the local limiter) once the timeout fires, then from its open breaker without
// waiting; the other primaries' keys are untouched; the denial cache spares Redis
// repeated denials on a cluster as on one server. One failure opens the breaker, for the
// whole test: exactly one decision waits out the timeout, however slow the machine.
TEST_F(ClusterTest, APausedPrimaryTimesOutOnlyItsKeysAndTheDenialCacheWorks) {
  auto options = RedisStoreOptions::FromUrl(cluster_->url("timeout=2s&on_error=local"));
  ASSERT_TRUE(options.ok()) << options.status();
  options->breaker_failures = 1;
  options->breaker_open = std::chrono::minutes(10);
  auto opened = RedisStore::Open(*options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  RedisStore* store = opened->get();
  const Policy policy = *Policy::Parse("fixed_window:2/1h");
  RedisServer* victim = cluster_->PrimaryOf(redis::SlotOf(FixedWindowKey("client-0")));
  ASSERT_NE(victim, nullptr);
  const auto [on, off] = KeysOnAndOff(*cluster_, victim->port(), 4);

  // Denial cache: once Redis has denied, repeats are answered in process.
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(store->Decide({off[0], policy, 1, std::nullopt})->allowed);
  ASSERT_FALSE(store->Decide({off[0], policy, 1, std::nullopt})->allowed);
  const auto calls = store->redis_stats().calls;
  for (int i = 0; i < 20; ++i) {
    const Decision d = *store->Decide({off[0], policy, 1, std::nullopt});
    EXPECT_FALSE(d.allowed);
    EXPECT_FALSE(d.degraded);
  }
  EXPECT_EQ(store->redis_stats().calls, calls);
  EXPECT_EQ(store->redis_stats().denial_cache_hits, 20u);

  PausedWrites paused({victim});
  for (const auto& key : on) {
    // The local limiter applies the policy from scratch: 2 allowed, then denied.
    for (int i = 0; i < 3; ++i) {
      const Decision d = *store->Decide({key, policy, 1, std::nullopt});
      EXPECT_TRUE(d.degraded) << key;
      EXPECT_EQ(d.allowed, i < 2) << key << " #" << i;
    }
  }
  // Every one answered while the primary still held its calls: none waited for it.
  EXPECT_EQ(store->redis_stats().timeouts, 1u) << "one timeout, then the open breaker";
  for (const auto& key : off) {
    if (key == off[0]) continue;
    EXPECT_FALSE(store->Decide({key, policy, 1, std::nullopt})->degraded) << key;
  }
}

std::string NodeId(RedisServer& node) {
  std::string id = node.Cli({"CLUSTER", "MYID"});
  while (!id.empty() && (id.back() == '\n' || id.back() == '\r')) id.pop_back();
  return id;
}

// Runs decisions on `keys` from 4 threads (each with some in flight, so batches form)
// until `stop`; counts what each key was allowed, and anything degraded or failed.
class Load {
 public:
  Load(Store& store, std::vector<std::string> keys, Policy policy)
      : store_(store), keys_(std::move(keys)), policy_(policy) {
    for (int t = 0; t < 4; ++t) threads_.emplace_back([this, t] { Run(t); });
  }
  ~Load() { Stop(); }
  void Stop() {
    stop_ = true;
    threads_.clear();
  }
  std::int64_t decisions() const { return decisions_; }
  std::int64_t failures() const { return failures_; }
  // What the first failure said ("" when none): a failing expectation on failures()
  // says why.
  std::string first_failure() {
    std::lock_guard lock(mu_);
    return first_failure_;
  }
  std::map<std::string, std::int64_t> allowed() {
    std::lock_guard lock(mu_);
    return allowed_;
  }

 private:
  void Run(int t) {
    // Bounded in count and time, far beyond what any test waits for.
    const auto deadline = Steady::now() + 4 * kHangGuard;
    std::counting_semaphore<8> slots(8);
    for (std::size_t i = t; !stop_ && i < 3 * kLoadMax && Steady::now() < deadline; i += 3) {
      slots.acquire();
      const std::string& key = keys_[i % keys_.size()];
      store_.DecideAsync({key, policy_, 1, std::nullopt},
                         [this, &slots, &key](absl::StatusOr<Decision> d) {
                           ++decisions_;
                           if (!d.ok() || d->degraded) {
                             ++failures_;
                             std::lock_guard lock(mu_);
                             if (first_failure_.empty()) {
                               first_failure_ = d.ok() ? std::string("degraded (on_error answered)")
                                                       : d.status().ToString();
                             }
                           } else if (d->allowed) {
                             std::lock_guard lock(mu_);
                             ++allowed_[key];
                           }
                           slots.release();
                         });
    }
    for (int i = 0; i < 8; ++i) slots.acquire();
  }

  Store& store_;
  const std::vector<std::string> keys_;
  const Policy policy_;
  std::atomic<bool> stop_{false};
  std::atomic<std::int64_t> decisions_{0}, failures_{0};
  std::mutex mu_;
  std::map<std::string, std::int64_t> allowed_;
  std::string first_failure_;
  std::vector<std::jthread> threads_;
};

// The store's failure counters, for a failing expectation's message.
std::string StatsLine(RedisStore& store) {
  const RedisStats r = store.redis_stats();
  return fmt::format(
      "errors {} (last: {}), timeouts {}, retried {}, moved {}, asked {}, node batches sent "
      "again {}, breaker open {}",
      r.errors, r.last_error, r.timeouts, r.retried, r.moved, r.asked, r.node_batch_retries,
      r.breaker_open);
}

// What Redis holds for each key, read through floodgate (a cost-0 decision):
// limit - remaining = units admitted.
void ExpectStoredCountsMatch(Store& store, const Policy& policy,
                             const std::map<std::string, std::int64_t>& allowed,
                             const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    auto peek = store.Decide({key, policy, 0, std::nullopt});
    ASSERT_TRUE(peek.ok()) << peek.status();
    ASSERT_FALSE(peek->degraded);
    const auto it = allowed.find(key);
    const std::int64_t admitted = it == allowed.end() ? 0 : it->second;
    EXPECT_EQ(policy.limit - peek->remaining, admitted)
        << key << ": counted in Redis vs allowed to callers (a difference is a decision lost "
        << "or counted twice)";
  }
}

// One slot moved by hand, held half-migrated while decisions run: keys already moved
// (and new keys) are answered through ASK by the importing node, the rest by the old
// owner; after the move, MOVED. Every decision is counted exactly once.
TEST_F(ClusterTest, ASlotMigratedUnderLoadLosesAndDoublesNothing) {
  auto store = OpenRedis(cluster_->url("timeout=60s&denial_cache=0us&batch=16"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:1000000000/1h");
  // All under one hash tag: one slot.
  std::vector<std::string> keys;
  for (int i = 0; i < 30; ++i) keys.push_back(fmt::format("{{moving}}:client-{}", i));
  const int slot = redis::SlotOf(FixedWindowKey(keys[0]));
  RedisServer* source = cluster_->PrimaryOf(slot);
  ASSERT_NE(source, nullptr);
  RedisServer* target = cluster_->AnotherPrimary(*source);
  ASSERT_NE(target, nullptr);
  // The first 20 keys exist before the move begins.
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(store->Decide({keys[i], policy, 1, std::nullopt})->allowed);
  std::map<std::string, std::int64_t> before;
  for (int i = 0; i < 20; ++i) before[keys[i]] = 1;

  const std::string source_id = NodeId(*source), target_id = NodeId(*target);
  const std::string s = std::to_string(slot);
  ASSERT_THAT(target->Cli({"CLUSTER", "SETSLOT", s, "IMPORTING", source_id}), HasSubstr("OK"));
  ASSERT_THAT(source->Cli({"CLUSTER", "SETSLOT", s, "MIGRATING", target_id}), HasSubstr("OK"));
  // Move half the keys now.
  const auto migrate = [&](int first, int last) {
    std::vector<std::string> args = {
        "MIGRATE", "127.0.0.1", std::to_string(target->port()), "", "0", "5000", "KEYS"};
    for (int i = first; i < last; ++i) args.push_back(FixedWindowKey(keys[i]));
    ASSERT_THAT(source->Cli(args), HasSubstr("OK"));
  };
  migrate(0, 10);

  auto load = std::make_unique<Load>(*store, keys, policy);
  // Half-migrated, under load, until the importing node has answered through ASK.
  const auto asked_by = Steady::now() + kHangGuard;
  while (store->redis_stats().asked < 20 && Steady::now() < asked_by) std::this_thread::yield();
  EXPECT_GE(store->redis_stats().asked, 20u);
  migrate(10, 20);
  // New keys created meanwhile on the target under ASK; none may be left behind.
  EXPECT_EQ(source->Cli({"CLUSTER", "COUNTKEYSINSLOT", s}).substr(0, 1), "0");
  for (auto& node : cluster_->nodes()) {
    node->Cli({"CLUSTER", "SETSLOT", s, "NODE", target_id});
  }
  // After the move: the stale map is corrected by MOVED.
  const auto moved_by = Steady::now() + kHangGuard;
  while (store->redis_stats().moved == 0 && Steady::now() < moved_by) std::this_thread::yield();
  const std::int64_t decisions_at_move = load->decisions();
  const auto more_by = Steady::now() + kHangGuard;
  while (load->decisions() < decisions_at_move + 500 && Steady::now() < more_by) {
    std::this_thread::yield();
  }
  load->Stop();
  EXPECT_GT(store->redis_stats().moved, 0u);
  EXPECT_EQ(load->failures(), 0) << load->first_failure() << "; " << StatsLine(*store);
  // The load carried on past the move (how many ran before it depends on the machine).
  EXPECT_GE(load->decisions(), decisions_at_move + 500);
  auto allowed = load->allowed();
  for (const auto& [key, n] : before) allowed[key] += n;
  ExpectStoredCountsMatch(*store, policy, allowed, keys);
  ASSERT_EQ(cluster_->PrimaryOf(slot), target);

  // The redirects show in /metrics.
  server::Metrics metrics;
  const std::string text = metrics.Render(*store);
  EXPECT_THAT(text,
              ::testing::ContainsRegex("floodgate_redis_redirects_total\\{kind=\"ask\"\\} [1-9]"));
  EXPECT_THAT(
      text, ::testing::ContainsRegex("floodgate_redis_redirects_total\\{kind=\"moved\"\\} [1-9]"));
}

// A node's batch meets a key whose slot moved away behind the store's back (its slot map
// is stale): the call is refused with nothing written, and its decisions go again slot
// by slot, the moved one following MOVED. Each is counted exactly once.
TEST_F(ClusterTest, ANodesBatchWithAMovedKeyIsSentAgainBySlot) {
  auto store = OpenRedis(cluster_->url("batch=64&connections=1&timeout=60s&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:1000/1h");
  const auto slot_of = [](const std::string& key) { return redis::SlotOf(FixedWindowKey(key)); };
  RedisServer* source = cluster_->PrimaryOf(slot_of("stays"));
  ASSERT_NE(source, nullptr);
  RedisServer* target = cluster_->AnotherPrimary(*source);
  ASSERT_NE(target, nullptr);
  // `moves` sorts after "stays" (a higher slot of the same node): "stays" routes the call.
  std::string moves, hold_a, hold_b;
  for (int i = 0; moves.empty() || hold_a.empty() || hold_b.empty(); ++i) {
    const std::string key = fmt::format("k{}", i);
    if (cluster_->PrimaryOf(slot_of(key)) != source) continue;
    if (moves.empty() && slot_of(key) > slot_of("stays")) {
      moves = key;
    } else if (hold_a.empty()) {
      hold_a = key;
    } else if (hold_b.empty()) {
      hold_b = key;
    }
  }
  ASSERT_TRUE(store->Decide({moves, policy, 1, std::nullopt})->allowed);
  // Move `moves`'s slot (and its key) to the target; the store is not told.
  const std::string slot = std::to_string(slot_of(moves));
  const std::string source_id = NodeId(*source), target_id = NodeId(*target);
  ASSERT_THAT(target->Cli({"CLUSTER", "SETSLOT", slot, "IMPORTING", source_id}), HasSubstr("OK"));
  ASSERT_THAT(source->Cli({"CLUSTER", "SETSLOT", slot, "MIGRATING", target_id}), HasSubstr("OK"));
  ASSERT_THAT(source->Cli({"MIGRATE", "127.0.0.1", std::to_string(target->port()), "", "0", "5000",
                           "KEYS", FixedWindowKey(moves)}),
              HasSubstr("OK"));
  for (auto& node : cluster_->nodes()) node->Cli({"CLUSTER", "SETSLOT", slot, "NODE", target_id});

  // Two calls out on the silent source hold the lane's queue, so that "stays" and
  // `moves` leave together, in one call, when it answers.
  PausedWrites paused({source});
  std::vector<std::future<absl::StatusOr<Decision>>> answers;
  const auto decide = [&](const std::string& key) {
    auto promise = std::make_shared<std::promise<absl::StatusOr<Decision>>>();
    answers.push_back(promise->get_future());
    store->DecideAsync({key, policy, 1, std::nullopt},
                       [promise](absl::StatusOr<Decision> d) { promise->set_value(std::move(d)); });
  };
  const auto calls_reach = [&](std::uint64_t calls) {
    const auto by = Steady::now() + kHangGuard;
    while (store->redis_stats().calls < calls && Steady::now() < by) std::this_thread::yield();
    return store->redis_stats().calls >= calls;
  };
  const std::uint64_t calls = store->redis_stats().calls;
  decide(hold_a);
  ASSERT_TRUE(calls_reach(calls + 1));
  decide(hold_b);
  ASSERT_TRUE(calls_reach(calls + 2));
  decide("stays");
  decide(moves);
  // A round trip through the store's I/O thread, which routes a cluster's decisions in
  // order: both are queued behind the two calls out before the source answers.
  (void)store->Health();
  paused.End();
  std::vector<std::int64_t> remaining;
  for (auto& answer : answers) {
    const absl::StatusOr<Decision> d = answer.get();
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_FALSE(d->degraded);
    remaining.push_back(d->remaining);
  }
  EXPECT_EQ(remaining, (std::vector<std::int64_t>{999, 999, 999, 998}));
  EXPECT_EQ(store->redis_stats().node_batches, 1u);
  EXPECT_EQ(store->redis_stats().node_batch_retries, 1u);
  EXPECT_GT(store->redis_stats().moved, 0u);
  // Nothing was counted twice: the next decisions see one admission each.
  EXPECT_EQ(store->Decide({"stays", policy, 0, std::nullopt})->remaining, 999);
  EXPECT_EQ(store->Decide({moves, policy, 0, std::nullopt})->remaining, 998);
}

// redis-cli moves a range of slots (and their keys) while decisions run on keys in it.
TEST_F(ClusterTest, ReshardingByRedisCliUnderLoadLosesAndDoublesNothing) {
  auto store = OpenRedis(cluster_->url("timeout=60s&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:1000000000/1h");
  RedisServer* source = cluster_->PrimaryOf(0);  // redis-cli takes the lowest slots first
  ASSERT_NE(source, nullptr);
  RedisServer* target = cluster_->AnotherPrimary(*source);
  ASSERT_NE(target, nullptr);
  constexpr int kMovedSlots = 300;
  std::vector<std::string> keys;
  for (int i = 0; keys.size() < 60; ++i) {
    const std::string key = fmt::format("client-{}", i);
    if (redis::SlotOf(FixedWindowKey(key)) < kMovedSlots) keys.push_back(key);
  }
  const auto refreshes_before = store->redis_stats().topology_refreshes;
  const auto began = Steady::now();
  auto load = std::make_unique<Load>(*store, keys, policy);
  const std::string out =
      source->Cli({"--cluster", "reshard", fmt::format("127.0.0.1:{}", source->port()),
                   "--cluster-from", NodeId(*source), "--cluster-to", NodeId(*target),
                   "--cluster-slots", std::to_string(kMovedSlots), "--cluster-yes"});
  const std::int64_t decisions_at_move = load->decisions();
  const auto more_by = Steady::now() + kHangGuard;
  while (load->decisions() < decisions_at_move + 500 && Steady::now() < more_by) {
    std::this_thread::yield();
  }
  load->Stop();
  ASSERT_EQ(cluster_->PrimaryOf(0), target) << out;
  EXPECT_EQ(load->failures(), 0) << load->first_failure() << "; " << StatsLine(*store);
  EXPECT_GE(load->decisions(), decisions_at_move + 500);
  EXPECT_GT(store->redis_stats().moved, 0u);
  // A storm of MOVED asks for the topology at most once per 100 ms, not once per MOVED.
  const auto refreshes = store->redis_stats().topology_refreshes - refreshes_before;
  EXPECT_LE(refreshes, 2 + (Steady::now() - began) / milliseconds(100))
      << store->redis_stats().moved << " MOVED";
  ExpectStoredCountsMatch(*store, policy, load->allowed(), keys);
  // The keys span many slots of the source: batched per node (lua/node_batch.lua), whose
  // calls meeting a moved key were refused with nothing written and sent again by slot.
  EXPECT_GT(store->redis_stats().node_batches, 0u);
  std::printf(
      "resharded %d slots under load: %lld decisions, %llu MOVED, %llu ASK, %llu node "
      "batches (%llu sent again by slot)\n",
      kMovedSlots, static_cast<long long>(load->decisions()),
      static_cast<unsigned long long>(store->redis_stats().moved),
      static_cast<unsigned long long>(store->redis_stats().asked),
      static_cast<unsigned long long>(store->redis_stats().node_batches),
      static_cast<unsigned long long>(store->redis_stats().node_batch_retries));
}

// Two primaries each naming the other as a slot's owner (CLUSTER SETSLOT ... NODE on
// both): a redirect loop no refresh of the slot map ends. The store follows it a bounded
// number of times and answers by on_error with why, instead of spinning until the deadline.
TEST_F(ClusterTest, ARedirectLoopIsAnsweredByOnErrorAfterBoundedTries) {
  const std::string key = "looping";
  const int slot = redis::SlotOf(FixedWindowKey(key));
  RedisServer* first = cluster_->PrimaryOf(slot);
  ASSERT_NE(first, nullptr);
  RedisServer* second = cluster_->AnotherPrimary(*first);
  ASSERT_NE(second, nullptr);
  // The timeout is a guard: a loop without the bound would wait it out and count it.
  auto store = OpenRedis(cluster_->url("timeout=60s&on_error=fail_closed&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:10/1h");
  // The slot holds no key: a primary refuses to give away a slot it holds keys of.
  const std::string first_id = NodeId(*first), second_id = NodeId(*second);
  ASSERT_THAT(first->Cli({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", second_id}),
              ::testing::HasSubstr("OK"));
  ASSERT_THAT(second->Cli({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", first_id}),
              ::testing::HasSubstr("OK"));
  auto looped = store->Decide({key, policy, 1, std::nullopt});
  ASSERT_TRUE(looped.ok()) << looped.status();
  EXPECT_TRUE(looped->degraded);
  EXPECT_FALSE(looped->allowed);  // fail_closed
  const RedisStats stats = store->redis_stats();
  EXPECT_THAT(stats.last_error, ::testing::HasSubstr("still redirected after 16 tries"));
  EXPECT_EQ(stats.timeouts, 0u);  // answered by the bound, not by the deadline
  EXPECT_GE(stats.moved, 16u);
}

}  // namespace
}  // namespace floodgate::testing

// The Redis store against a real redis-server: conformance, batching, atomicity across
// threads, script loss, restarts, pauses, TTLs, authentication.
#include <floodgate/memory_store.h>
#include <floodgate/redis_store.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <barrier>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <future>
#include <random>
#include <sstream>
#include <thread>

#include "common/strings.h"
#include "conformance.h"
#include "redis_server.h"
#include "server/config.h"
#include "server/http_server.h"
#include "server/service.h"
#include "store/redis/breaker.h"
#include "store/redis/lua_sources.h"
#include "store/redis/resp.h"

namespace floodgate::testing {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using Steady = std::chrono::steady_clock;

// lua/batch.lua as the store loads it (redis::lua::DriverScript).
std::string BatchScript() { return redis::lua::DriverScript(redis::lua::k_batch); }

class RedisTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = RedisServer::Start(); }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  // Keys of every test live under their own prefix. Tests here count exact answers from
  // Redis, so unless one sets its own timeout, a call may take 10 s: under a loaded
  // `ctest -j` the 50 ms default let a slow call be answered by on_error (degraded, from
  // the local limiter), which read as a wrong count.
  static std::string Url(const std::string& options = "") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string query = fmt::format("prefix=t:{}.{}:", info->test_suite_name(), info->name());
    if (!options.starts_with("timeout=") && options.find("&timeout=") == std::string::npos) {
      query += "&timeout=10s";
    }
    return server_->url(options.empty() ? query : query + "&" + options);
  }

  static inline std::unique_ptr<RedisServer> server_;
};

// ---- conformance -------------------------------------------------------------------

TEST_F(RedisTest, ConformanceVectorsOneCallPerDecision) {
  auto store = OpenRedis(Url("batch=1"));
  ASSERT_NE(store, nullptr);
  const auto cases = LoadAllVectors();
  ASSERT_GE(cases.size(), 60u);
  for (std::size_t i = 0; i < cases.size(); ++i) RunCase(*store, cases[i], fmt::format("c{}:", i));
  EXPECT_EQ(store->redis_stats().batched_decisions, 0u);
  EXPECT_EQ(store->redis_stats().degraded, 0u);
}

// Every step of a case submitted at once on one connection: they go out as batch
// script calls, and each decision still sees the ones before it.
TEST_F(RedisTest, ConformanceVectorsBatched) {
  auto store = OpenRedis(Url("connections=1&batch=7"));
  ASSERT_NE(store, nullptr);
  const auto cases = LoadAllVectors();
  for (std::size_t c = 0; c < cases.size(); ++c) {
    RunCaseInFlight(*store, cases[c], fmt::format("b{}:", c));
  }
  EXPECT_GT(store->redis_stats().batched_decisions, 300u);
  EXPECT_EQ(store->redis_stats().degraded, 0u);
}

// gcra in whole µs: a same-instant burst admits exactly B, one call per decision and
// batched (the whole burst in flight at once).
TEST_F(RedisTest, SameInstantGcraBurstsAdmitExactlyB) {
  // A burst of up to 1,000 in flight at once: the timeout leaves room for a slow tree.
  auto single = OpenRedis(Url("batch=1&denial_cache=0us&timeout=10s"));
  ASSERT_NE(single, nullptr);
  ExpectSameInstantGcraBurstsAdmitExactlyB(*single, "single:");
  auto batched = OpenRedis(Url("connections=1&batch=64&denial_cache=0us&timeout=10s"));
  ASSERT_NE(batched, nullptr);
  ExpectSameInstantGcraBurstsAdmitExactlyB(*batched, "batched:");
  EXPECT_GT(batched->redis_stats().batched_decisions, 1000u);
}

// A gcra key is one integer: Redis stores it int-encoded, in exactly the memory of a plain
// `SET key <integer> PX <ttl>` under a key name of the same length.
TEST_F(RedisTest, AGcraKeyCostsWhatAPlainSetOfAnIntegerCosts) {
  auto store = OpenRedis(Url());
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("gcra:7/1m");
  ASSERT_TRUE(store->Decide({"user:12345", policy, 1, std::nullopt}).ok());
  const std::string key = "t:RedisTest.AGcraKeyCostsWhatAPlainSetOfAnIntegerCosts:gcra:user:12345";
  const std::string plain(key.size(), 'p');
  server_->Cli({"SET", plain, "1700000000123456", "PX", "60000"});
  EXPECT_EQ(server_->Cli({"OBJECT", "ENCODING", key}), "int\n");
  const std::string usage = server_->Cli({"MEMORY", "USAGE", key});
  EXPECT_GT(std::atoi(usage.c_str()), 0) << usage;
  EXPECT_EQ(usage, server_->Cli({"MEMORY", "USAGE", plain}));
}

// sliding_log stores runs (algorithms.md, revision 2): one sorted-set member per admission
// whatever its cost, so a key never holds more members than L.
TEST_F(RedisTest, SlidingLogKeepsOneMemberPerAdmission) {
  auto store = OpenRedis(Url("denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const std::string prefix = "t:RedisTest.SlidingLogKeepsOneMemberPerAdmission:sl:";
  const Policy big = *Policy::Parse("sliding_log:100000/1h");
  auto d = store->Decide({"big", big, 100'000, std::nullopt});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 0);
  EXPECT_EQ(server_->Cli({"ZCARD", prefix + "big"}), "1\n");
  d = store->Decide({"big", big, 1, std::nullopt});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->allowed);
  EXPECT_GT(d->retry_after, std::chrono::minutes(59));
  EXPECT_EQ(server_->Cli({"ZCARD", prefix + "big"}), "1\n");

  // Costs of 1 to 4 at distinct times: every admission one member, never more than L.
  const Policy small = *Policy::Parse("sliding_log:50/1h");
  const std::int64_t t0 = SystemNow().time_since_epoch().count();
  std::int64_t admissions = 0, units = 0;
  for (int i = 0; i < 120; ++i) {
    const std::int64_t cost = 1 + i % 4;
    d = store->Decide({"small", small, cost, TimePoint(microseconds(t0 + i))});
    ASSERT_TRUE(d.ok()) << d.status();
    if (d->allowed) {
      ++admissions;
      units += cost;
    }
    EXPECT_EQ(d->remaining, 50 - units);
    const int members = std::atoi(server_->Cli({"ZCARD", prefix + "small"}).c_str());
    ASSERT_EQ(members, admissions) << "after decision " << i;
    ASSERT_LE(members, 50);
  }
  EXPECT_GE(units, 47);  // filled: no cost of at most 4 fits any more
}

// Run totals (the members' ids) are renumbered from the oldest counted run before they
// would grow past 10^15, far inside the 2^53 where Lua's numbers stop being exact; no
// decision changes. The log is planted as a key admitted to for a very long time looks.
TEST_F(RedisTest, SlidingLogRenumbersRunTotalsBeforeTheyLoseExactness) {
  auto store = OpenRedis(Url("denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const std::string key = "t:RedisTest.SlidingLogRenumbersRunTotalsBeforeTheyLoseExactness:sl:k";
  const std::int64_t t = SystemNow().time_since_epoch().count();
  server_->Cli({"ZADD", key, std::to_string(t - 2000), "0999999999999990:5",
                std::to_string(t - 1000), "0999999999999998:8"});
  const Policy policy = *Policy::Parse("sliding_log:20/1h");
  const TimePoint now{microseconds(t)};
  auto d = store->Decide({"k", policy, 3, now});  // 13 counted: 16 after this
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 4);
  EXPECT_EQ(server_->Cli({"ZRANGE", key, "0", "-1"}),
            "0000000000000005:5\n0000000000000013:8\n0000000000000016:3\n");
  // The k-th oldest unit, k = 16 + c - 20, after renumbering: k = 2 is in the first run,
  // k = 6 in the second.
  d = store->Decide({"k", policy, 6, now});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->retry_after.count(), 3'600'000'000 - 2000);
  d = store->Decide({"k", policy, 10, now});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->retry_after.count(), 3'600'000'000 - 1000);
}

// ---- reservations (docs/reservations.md) -------------------------------------------

// The reservation vectors, one call per operation and with many sharing calls (every
// case's operations from several threads at once, each case on its own keys).
TEST_F(RedisTest, ReservationVectorsOneByOneAndBatched) {
  const auto cases = LoadReserveVectors();
  ASSERT_GE(cases.size(), 14u);
  auto store = OpenRedis(Url("batch=1&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  for (std::size_t c = 0; c < cases.size(); ++c)
    RunReserveCase(*store, cases[c], fmt::format("r{}:", c));
  auto batched = OpenRedis(Url("connections=1&batch=64&denial_cache=0us"));
  ASSERT_NE(batched, nullptr);
  std::vector<std::jthread> threads;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    threads.emplace_back([&, c] { RunReserveCase(*batched, cases[c], fmt::format("b{}:", c)); });
  }
  threads.clear();
  EXPECT_GT(batched->redis_stats().calls, 0u);
}

TEST_F(RedisTest, ReservationIdsAreOnlyThisStoresAndSettleOnce) {
  auto store = OpenRedis(Url());
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("gcra:10/1h");
  auto reservation = store->Reserve({"k", policy, 4});
  ASSERT_TRUE(reservation.ok()) << reservation.status();
  ASSERT_EQ(reservation->id.size(), 20u);
  for (const std::string& id : {std::string("zz"), std::string("ffff0000000000000000"),
                                reservation->id.substr(0, 19) + "x"}) {
    EXPECT_EQ(store->Settle({id, 1}).status().code(), absl::StatusCode::kNotFound) << id;
  }
  const std::vector<std::string> records = {"--scan", "--pattern", "t:*ReservationIds*res:*"};
  EXPECT_THAT(server_->Cli(records), ::testing::StartsWith("t:RedisTest."));  // held until settled
  auto settled = store->Settle({reservation->id, 1});
  ASSERT_TRUE(settled.ok()) << settled.status();
  EXPECT_EQ(settled->remaining, 9);
  EXPECT_EQ(store->Settle({reservation->id, 1}).status().code(), absl::StatusCode::kNotFound);
  // The record is gone with the settle: only the limit's key is left.
  EXPECT_EQ(server_->Cli(records), "");
}

// ---- multi-decisions (docs/multi.md) ------------------------------------------------

TEST_F(RedisTest, MultiVectorsOneByOneAndBatched) {
  auto store = OpenRedis(Url("denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const auto cases = LoadMultiVectors();
  ASSERT_GE(cases.size(), 9u);
  // The lease cases have a test of their own (the steps they take vary with their answers).
  std::size_t steps = 0;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    if (cases[c].holds) continue;
    RunMultiCase(*store, cases[c], fmt::format("m{}:", c));
    steps += cases[c].steps.size();
  }
  // Every step of a case in flight at once on one connection: the groups share batch calls
  // with each other, and each still sees the ones before.
  auto batched = OpenRedis(Url("connections=1&batch=64&denial_cache=0us"));
  ASSERT_NE(batched, nullptr);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    if (cases[c].holds) continue;
    RunMultiCase(*batched, cases[c], fmt::format("b{}:", c), /*in_flight=*/true);
  }
  EXPECT_EQ(store->redis_stats().multi_decisions + batched->redis_stats().multi_decisions,
            2 * steps);
  // In flight, several multi-decisions went out in one call.
  EXPECT_LT(batched->redis_stats().calls, store->redis_stats().calls);
}

// Multi-decisions that acquire leases (tests/vectors/multi/leases.json): in steps on Redis
// (docs/leases.md, "In a multi-decision"), with the answers of one atomic step.
TEST_F(RedisTest, MultiVectorsAcquiringLeases) {
  auto store = OpenRedis(Url("denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const auto cases = LoadMultiVectors();
  std::size_t leasing = 0;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    if (!cases[c].holds) continue;
    RunMultiCase(*store, cases[c], fmt::format("l{}:", c));
    ++leasing;
  }
  EXPECT_GE(leasing, 5u);
}

// A group's items and single decisions in the same batch call: each single decision still
// sees the group's writes before it, the group the singles' before it.
TEST_F(RedisTest, MultiDecisionsShareBatchesWithSingleOnes) {
  auto store = OpenRedis(Url("connections=1&batch=64&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy two = *Policy::Parse("fixed_window:2/1h");
  const TimePoint now{microseconds(1'700'000'000'000'000)};
  std::vector<std::promise<bool>> answers(6);
  const std::vector<CheckItem> items = {{"a", two}, {"b", two}};
  store->DecideAsync({"a", two, 1, now}, [&](absl::StatusOr<Decision> d) {
    answers[0].set_value(d.ok() && d->allowed);
  });
  store->DecideAllAsync({items, now}, [&](absl::StatusOr<MultiDecision> d) {
    answers[1].set_value(d.ok() && d->allowed);  // a: 2 of 2, b: 1 of 2
  });
  store->DecideAllAsync({items, now}, [&](absl::StatusOr<MultiDecision> d) {
    answers[2].set_value(d.ok() && d->allowed);  // a is full: nothing consumed
  });
  store->DecideAsync({"b", two, 1, now}, [&](absl::StatusOr<Decision> d) {
    answers[3].set_value(d.ok() && d->allowed);  // b: 2 of 2 (the denied group took none)
  });
  store->DecideAsync({"b", two, 1, now}, [&](absl::StatusOr<Decision> d) {
    answers[4].set_value(d.ok() && d->allowed);
  });
  store->DecideAsync({"a", two, 0, now}, [&](absl::StatusOr<Decision> d) {
    answers[5].set_value(d.ok() && d->allowed);  // a peek
  });
  std::vector<bool> got;
  for (auto& a : answers) got.push_back(a.get_future().get());
  EXPECT_THAT(got, ::testing::ElementsAre(true, true, false, true, false, true));
  EXPECT_GT(store->redis_stats().batched_decisions, 0u);
}

// What lua/batch.lua's release groups give back: for every algorithm, a reservation made
// and released leaves the key deciding exactly as a key that never saw it.
TEST_F(RedisTest, AReleasedReservationLeavesNoTrace) {
  const std::string batch = BatchScript();
  const std::int64_t t = 1'700'000'000'000'000;
  // kind, limit, period, burst
  const std::vector<std::array<std::string, 4>> policies = {
      {"gcra", "10", "1000000", "10"}, {"tb", "10", "1000000", "10"},
      {"tbi", "10", "1000000", "10"},  {"sl", "10", "1000000", "10"},
      {"sw", "10", "1000000", "10"},   {"fw", "10", "1000000", "10"}};
  for (const auto& policy : policies) {
    SCOPED_TRACE(policy[0]);
    const auto call = [&](const std::string& key, const std::string& mode, std::int64_t at,
                          std::int64_t now, std::int64_t cost) {
      std::vector<std::string> args = {"EVAL", batch, "1", key, "1"};
      args.insert(args.end(), policy.begin(), policy.end());
      if (mode.empty()) {
        args.push_back("0");
      } else {
        args.insert(args.end(),
                    {"1", "1", "1", mode, "0", mode == "release" ? std::to_string(at) : ""});
      }
      args.insert(args.end(), {"1", std::to_string(now), std::to_string(cost)});
      return server_->Cli(args);
    };
    const std::string used = "release:used:" + policy[0], fresh = "release:fresh:" + policy[0];
    // Both keys take 3 at t; `used` reserves 4 more at t + 1 ms and gives them back at
    // t + 2 ms. From then on both keys must answer the same, every way they are asked.
    call(used, "", 0, t, 3);
    call(fresh, "", 0, t, 3);
    const std::string reserved = call(used, "all", 0, t + 1000, 4);
    ASSERT_EQ(reserved.substr(0, 2), "1\n") << reserved;  // allowed
    // The smooth bucket's level is a double: given back, its last bits may differ from a
    // level that never moved, and a wait computed from it by a microsecond.
    const std::int64_t slack = policy[0] == "tb" ? 1 : 0;
    const auto same = [&](const std::string& a, const std::string& b) {
      std::istringstream x(a), y(b);
      std::vector<std::int64_t> u, v;
      for (std::int64_t n; x >> n;) u.push_back(n);
      for (std::int64_t n; y >> n;) v.push_back(n);
      if (u.size() != 5 || v.size() != 5) return false;
      for (std::size_t i = 0; i < 5; ++i) {
        if (std::abs(u[i] - v[i]) > (i >= 2 ? slack : 0)) return false;
      }
      return true;
    };
    const std::string released = call(used, "release", t + 1000, t + 2000, 4);
    const std::string untouched = call(fresh, "all", 0, t + 2000, 0);
    EXPECT_TRUE(same(released, untouched)) << "the peek after the release:\n"
                                           << released << "vs\n"
                                           << untouched;
    for (const std::int64_t dt : {3000, 250'000, 999'999, 1'000'001}) {
      for (const std::int64_t cost : {0, 1, 7, 8}) {
        const std::string a = call(used, "dry", 0, t + dt, cost);
        const std::string b = call(fresh, "dry", 0, t + dt, cost);
        EXPECT_TRUE(same(a, b)) << "at +" << dt << " cost " << cost << ":\n" << a << "vs\n" << b;
      }
    }
  }
}

// Redis down: on_error answers for every item as one multi-decision (local: the
// in-process limiter decides them all or nothing), degraded, within the timeout.
TEST(RedisMulti, OnErrorAnswersForTheWholeRequest) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto local = OpenRedis(server->url("timeout=50ms&on_error=local"));
  auto closed = OpenRedis(server->url("timeout=50ms&on_error=fail_closed"));
  auto open = OpenRedis(server->url("timeout=50ms&on_error=fail_open"));
  ASSERT_TRUE(local && closed && open);
  server->Kill();
  const Policy one = *Policy::Parse("fixed_window:1/1h");
  const Policy three = *Policy::Parse("fixed_window:3/1h");
  const std::vector<CheckItem> items = {{"x", one, 1, "one"}, {"y", three, 1, "three"}};
  for (int i = 0; i < 3; ++i) {
    auto l = local->DecideAll({items, std::nullopt});
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_TRUE(l->degraded);
    EXPECT_EQ(l->allowed, i == 0) << i;
    // Denied requests spent nothing of "three", in the local limiter too.
    EXPECT_EQ(l->items[1].remaining, 2) << i;
    auto c = closed->DecideAll({items, std::nullopt});
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(c->degraded && !c->allowed);
    EXPECT_THAT(c->denied_by, ::testing::ElementsAre(0, 1));
    auto o = open->DecideAll({items, std::nullopt});
    ASSERT_TRUE(o.ok());
    EXPECT_TRUE(o->degraded && o->allowed);
  }
}

// A Redis lease keeps no record (docs/leases.md): its id is its key and its member, and
// only the true id releases it. Ids forged from a true one (another random part, a shorter
// lease time, which would trim other leases) find nothing and change nothing, whatever
// the key's bytes; the longest key's id stays within kMaxReservationIdBytes.
TEST_F(RedisTest, ALeaseIdIsItsKeyAndMemberAndOnlyTheTrueOneReleases) {
  auto store = OpenRedis(Url());
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("concurrency:2,lease=30s");
  for (const std::string& key :
       {std::string("tenant\r\n\0:7", 11), std::string(kMaxKeyBytes, 'k')}) {
    SCOPED_TRACE(key.size());
    EXPECT_EQ(server_->Cli({"FLUSHALL"}), "OK\n");
    const auto lease = store->Acquire(AcquireRequest{key, policy, std::nullopt});
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_TRUE(lease->decision.allowed);
    EXPECT_EQ(lease->decision.remaining, 1);
    const std::string& id = lease->id;
    EXPECT_LE(id.size(), kMaxReservationIdBytes);
    EXPECT_EQ(id.find('.'), id.find_first_of(".+/=\r\n,"));  // base64url, then the member
    EXPECT_EQ(server_->Cli({"DBSIZE"}), "1\n");              // the key alone: no record
    const auto held = [&] {
      auto peek = store->Decide({key, policy, 0, std::nullopt});
      return peek.ok() ? policy.limit - peek->remaining : -1;
    };
    const std::size_t member = id.find('.') + 1;
    std::string other_random = id;
    other_random[member] = other_random[member] == '0' ? '1' : '0';
    std::string shorter_lease = id;
    const std::size_t t = shorter_lease.find(".30000000.");
    ASSERT_NE(t, std::string::npos) << id;
    shorter_lease.replace(t, 10, ".1000.");
    for (const std::string& forged : {other_random, shorter_lease, "!!." + id.substr(member),
                                      id.substr(0, member), id.substr(0, member) + "x.1.1.1"}) {
      SCOPED_TRACE(forged);
      const auto released = store->Release(ReleaseRequest{forged, std::nullopt});
      EXPECT_TRUE(absl::IsNotFound(released.status())) << released.status();
      EXPECT_EQ(held(), 1);
    }
    const auto at_a_cost = store->Settle(SettleRequest{id, 1, std::nullopt});
    EXPECT_TRUE(absl::IsInvalidArgument(at_a_cost.status())) << at_a_cost.status();
    EXPECT_EQ(held(), 1);
    const auto released = store->Release(ReleaseRequest{id, std::nullopt});
    ASSERT_TRUE(released.ok()) << released.status();
    EXPECT_EQ(released->remaining, 2);
    EXPECT_EQ(held(), 0);
    EXPECT_TRUE(absl::IsNotFound(store->Release(ReleaseRequest{id, std::nullopt}).status()));
  }
}

// Redis down (docs/leases.md): an acquire, alone or in a multi-decision, is answered by
// on_error within the timeout and never holds a lease: fail_open admits with nothing to
// release, fail_closed and local deny.
TEST(RedisLeases, OnErrorAnswersWithoutALease) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  const Policy leases = *Policy::Parse("concurrency:3,lease=1m");
  const Policy rate = *Policy::Parse("sliding_log:10/1h");
  const std::vector<CheckItem> items = {{"r", rate, 1, "rate"}, {"c", leases, 1, "running"}};
  std::vector<std::unique_ptr<RedisStore>> stores;
  for (const char* mode : {"fail_open", "fail_closed", "local"}) {
    stores.push_back(OpenRedis(server->url(fmt::format("timeout=50ms&on_error={}", mode))));
    ASSERT_NE(stores.back(), nullptr) << mode;
  }
  server->Kill();
  for (std::size_t s = 0; s < stores.size(); ++s) {
    const bool open = s == 0;
    const auto begin = std::chrono::steady_clock::now();
    const auto lease = stores[s]->Acquire(AcquireRequest{"c", leases, std::nullopt});
    ASSERT_TRUE(lease.ok()) << s << ": " << lease.status();
    EXPECT_TRUE(lease->decision.degraded) << s;
    EXPECT_EQ(lease->decision.allowed, open) << s;
    EXPECT_TRUE(lease->id.empty()) << s;
    const auto multi = stores[s]->DecideAll({items, std::nullopt});
    ASSERT_TRUE(multi.ok()) << s << ": " << multi.status();
    EXPECT_TRUE(multi->degraded) << s;
    EXPECT_EQ(multi->allowed, open) << s;
    EXPECT_TRUE(multi->held.empty()) << s;
    EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(4 * 50 + 600))
        << s << ": at most two store calls' timeouts, plus the margin of the other tests";
  }
}

// A denial Redis gave for one item is remembered: the same request is then denied without
// a round trip, naming that item; the items not asked are reported unknown.
TEST_F(RedisTest, AMultiDecisionIsDeniedFromTheDenialCache) {
  auto store = OpenRedis(Url("denial_cache=10ms"));
  ASSERT_NE(store, nullptr);
  // gcra, not a fixed window: an epoch-aligned window's denial could end within the minute
  // (or the window turn) between two calls, whenever the test happens to run.
  const Policy hour = *Policy::Parse("gcra:1/1h");
  const Policy many = *Policy::Parse("gcra:100/1h");
  const std::vector<CheckItem> items = {{"k:many", many, 1, "many"}, {"k:hour", hour, 1, "hour"}};
  ASSERT_TRUE(store->DecideAll({items, std::nullopt})->allowed);
  auto denied = store->DecideAll({items, std::nullopt});
  ASSERT_TRUE(denied.ok());
  EXPECT_FALSE(denied->allowed);
  EXPECT_FALSE(denied->from_denial_cache);
  const auto calls = store->redis_stats().calls;
  auto cached = store->DecideAll({items, std::nullopt});
  ASSERT_TRUE(cached.ok());
  EXPECT_FALSE(cached->allowed);
  EXPECT_TRUE(cached->from_denial_cache);
  EXPECT_THAT(cached->denied_by, ::testing::ElementsAre(1));
  EXPECT_THAT(cached->unknown, ::testing::ElementsAre(0));
  EXPECT_GT(cached->retry_after, std::chrono::minutes(1));
  EXPECT_EQ(store->redis_stats().calls, calls);  // no round trip
  EXPECT_EQ(store->DecideAll({items, std::nullopt})->items[1].remaining, 0);
}

// ---- atomicity -----------------------------------------------------------------------

TEST_F(RedisTest, EveryAlgorithmAdmitsExactlyItsCapacityUnderContention) {
  auto store = OpenRedis(Url("timeout=2s&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  ExpectExactCapacityUnderContention(*store);
  EXPECT_GT(store->redis_stats().batched_decisions, 0u);
}

// Leases taken in steps (docs/leases.md, "In a multi-decision"), many in flight: never
// more than the tighter limit, and the denied requests leave nothing held or spent.
TEST_F(RedisTest, LeasesInAMultiDecisionAreExactUnderContention) {
  auto store = OpenRedis(Url("timeout=2s&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  ExpectExactLeasesUnderContention(*store, "");
}

// ---- TTLs ----------------------------------------------------------------------------

TEST_F(RedisTest, EveryKeyWrittenHasATtl) {
  auto store = OpenRedis(Url());
  ASSERT_NE(store, nullptr);
  for (const char* text : {"gcra:5/1m", "token_bucket:5/1m", "token_bucket:5/1m,refill=interval",
                           "sliding_log:5/1m", "sliding_window:5/1m", "fixed_window:5/1m"}) {
    const Policy policy = *Policy::Parse(text);
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(store->Decide({fmt::format("k{}", i % 7), policy, 1 + i % 3, std::nullopt}).ok());
    }
  }
  const std::string without_ttl =
      server_->Cli({"EVAL",
                    "local n = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1])) do "
                    "if redis.call('PTTL', k) < 0 then n = n + 1 end end return n",
                    "0", "t:RedisTest.EveryKeyWrittenHasATtl:*"});
  EXPECT_EQ(without_ttl, "0\n");
  const std::string count = server_->Cli(
      {"EVAL", "return #redis.call('KEYS', ARGV[1])", "0", "t:RedisTest.EveryKeyWrittenHasATtl:*"});
  EXPECT_EQ(count, "42\n");  // 7 keys x 6 algorithms
}

// ---- hostile keys --------------------------------------------------------------------

// Client input only ever travels as a script argument: keys made of quotes, newlines,
// NULs, RESP fragments and Lua code are stored under exactly their bytes, counted apart,
// and never run.
TEST_F(RedisTest, HostileKeysAreOnlyEverArguments) {
  auto store = OpenRedis(Url("denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  server_->Cli({"SET", "canary", "1"});
  const std::vector<std::string> keys = {
      "quote\"'`",
      "new\nline\r\n",
      std::string("nul\0inside", 10),
      std::string("\0", 1),
      "*1\r\n$8\r\nFLUSHALL\r\n",
      "\r\n*3\r\n$3\r\nSET\r\n$5\r\npwned\r\n$1\r\n1\r\n",
      "]]) redis.call('SET', 'pwned', '1') --",
      "'); redis.call('FLUSHALL'); --",
      "KEYS[1]",
      "ARGV[1]",
      std::string(512, '\xff'),
  };
  const Policy policy = *Policy::Parse("fixed_window:2/1h");
  for (const std::string& key : keys) {
    for (int i = 0; i < 3; ++i) {
      auto d = store->Decide({key, policy, 1, std::nullopt});
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_FALSE(d->degraded);
      EXPECT_EQ(d->allowed, i < 2) << "attempt " << i;  // each key counted on its own
    }
  }
  redisContext* redis = redisConnect("127.0.0.1", server_->port());
  ASSERT_TRUE(redis != nullptr && redis->err == 0);
  const std::string prefix =
      fmt::format("t:{}.{}:fw:", "RedisTest", "HostileKeysAreOnlyEverArguments");
  for (const std::string& key : keys) {
    const std::string stored = prefix + key;
    const char* argv[] = {"EXISTS", stored.data()};
    const std::size_t lengths[] = {6, stored.size()};
    auto* reply = static_cast<redisReply*>(redisCommandArgv(redis, 2, argv, lengths));
    ASSERT_NE(reply, nullptr);
    EXPECT_EQ(reply->integer, 1) << "key stored under other bytes";
    freeReplyObject(reply);
  }
  redisFree(redis);
  EXPECT_EQ(server_->Cli({"EXISTS", "pwned"}), "0\n");
  EXPECT_EQ(server_->Cli({"GET", "canary"}), "1\n");
}

// The scripts check every argument before any decision runs, so bad input never applies
// half a batch; a batch checks each distinct argument string once and reuses it, which
// must not let a bad one through. Errors name the decision or policy and the reason.
TEST_F(RedisTest, ScriptsCheckEveryArgumentBeforeDecidingAnything) {
  const std::string batch = BatchScript();
  const std::string single = redis::lua::SingleScript(redis::lua::k_gcra);
  const auto eval = [&](const std::string& script, std::vector<std::string> args) {
    args.insert(args.begin(), {"EVAL", script});
    return server_->Cli(args);
  };
  // How redis-cli prints an error reply when its output is not a terminal.
  const auto Error = [](const std::string& message) { return message + "\n\n"; };
  const std::vector<std::string> gcra = {"1", "gcra", "10", "1000000", "10"};
  // p, its policies, the groups (g, then 5 values each), then 3 values per decision.
  const auto batch_of = [&](std::vector<std::string> policy,
                            std::vector<std::array<std::string, 3>> decisions,
                            std::vector<std::string> groups = {"0"}) {
    std::vector<std::string> args = {std::to_string(decisions.size())};
    for (std::size_t i = 0; i < decisions.size(); ++i) args.push_back(fmt::format("args:k{}", i));
    args.insert(args.end(), policy.begin(), policy.end());
    args.insert(args.end(), groups.begin(), groups.end());
    for (const auto& d : decisions) args.insert(args.end(), d.begin(), d.end());
    return eval(batch, args);
  };
  // Two decisions, then the server clock the batch read.
  EXPECT_THAT(batch_of(gcra, {{"1", "", "1"}, {"1", "", "1"}}),
              ::testing::StartsWith("1\n9\n0\n100000\n1\n9\n0\n100000\n1"));
  server_->Cli({"DEL", "args:k0", "args:k1", "args:k2"});
  // Groups: a known mode, in range, not overlapping, a release time for releases only.
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"1", "", "1"}}, {"1", "1", "2", "some", "0", ""}),
            Error("floodgate: group 1: mode must be all, dry or release"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"1", "", "1"}}, {"1", "2", "2", "all", "0", ""}),
            Error("floodgate: group 1: items out of range or overlapping another group"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"1", "", "1"}, {"1", "", "1"}},
                     {"2", "1", "2", "all", "0", "", "2", "2", "all", "0", ""}),
            Error("floodgate: group 2: items out of range or overlapping another group"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}}, {"1", "1", "1", "release", "0", ""}),
            Error("floodgate: group 1: at is the release time, given for release groups only"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}}, {"1", "1", "1", "all", "65536", ""}),
            Error("floodgate: group 1: shadow mask must be an integer in [0, 65535]"));

  // An unlisted group: '+' joins the previous item's group, never a listed group's item,
  // and never past 16 items.
  EXPECT_EQ(batch_of(gcra, {{"+1", "", "1"}}),
            Error("floodgate: decision 1: '+' joins the previous item's group: none to join, or "
                  "the item is listed"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"+1", "", "1"}, {"+1", "", "1"}},
                     {"1", "1", "2", "all", "0", ""}),
            Error("floodgate: decision 2: '+' joins the previous item's group: none to join, or "
                  "the item is listed"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"1", "", "1"}, {"+1", "", "1"}},
                     {"1", "1", "2", "all", "0", ""}),
            Error("floodgate: decision 3: '+' joins the previous item's group: none to join, or "
                  "the item is listed"));
  {
    std::vector<std::array<std::string, 3>> seventeen(17, {"+1", "", "1"});
    seventeen[0][0] = "1";
    EXPECT_EQ(batch_of(gcra, seventeen),
              Error("floodgate: decision 17: a group takes at most 16 items"));
  }
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"1", "", "1e3"}}),
            Error("floodgate: decision 2: cost must be an integer in [0, 1000000000]"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"2", "", "1"}}),
            Error("floodgate: decision 2: policy number out of range"));
  // The cost "1" is known good by decision 3, its explicit now is not.
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"1", "", "1"}, {"1", "12x", "1"}}),
            Error("floodgate: decision 3: now must be empty or an integer count of microseconds"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"1", "", " 1"}}),
            Error("floodgate: decision 2: cost must be an integer in [0, 1000000000]"));
  // None of the refused batches decided anything.
  EXPECT_EQ(server_->Cli({"EXISTS", "args:k0", "args:k1", "args:k2"}), "0\n");

  EXPECT_EQ(batch_of({"1", "gcra", "30000", "1000000", "30000"}, {{"1", "", "1"}}),
            Error("floodgate: policy 1: gcra: period / limit rounded up to whole us slows the "
                  "rate by more than 0.1%"));
  EXPECT_EQ(batch_of({"1", "sl", "100001", "1000000", "100001"}, {{"1", "", "1"}}),
            Error("floodgate: policy 1: sliding_log limit must be at most 100000"));
  EXPECT_EQ(eval(single, {"1", "args:s", "gcra", "", "10", "1000000", "10", "-1"}),
            Error("floodgate: cost must be an integer in [0, 1000000000]"));
  EXPECT_EQ(eval(single, {"1", "args:s", "gcra", "", "10", "1000000", "10", "1"}),
            "1\n9\n0\n100000\n");
}

// lua/reservation.lua settles a call's records under the policy each record names (the
// previous settle's when it names the same, else found by name): settles of interleaved
// policies, two of one kind with other numbers, answer in one call as each does alone.
TEST_F(RedisTest, SettlesOfInterleavedPoliciesInOneCallAnswerAsAlone) {
  const std::string script = redis::lua::DriverScript(redis::lua::k_reservation);
  // Two gcra policies and a fixed window, sent as p, then kind, limit, period_us, burst.
  const std::vector<std::array<std::string, 4>> sent = {{"gcra", "10", "1000000", "10"},
                                                        {"gcra", "20", "1000000", "20"},
                                                        {"fw", "10", "1000000", "10"}};
  std::vector<std::string> policies = {std::to_string(sent.size())};
  for (const auto& policy : sent) policies.insert(policies.end(), policy.begin(), policy.end());
  const std::int64_t t = 1'700'000'000'000'000;
  const std::vector<int> policy_of = {1, 2, 3, 1, 3, 2};
  const std::vector<int> actual_of = {0, 1, 5, 2, 0, 3};
  const std::size_t n = policy_of.size();
  // Each operation's 7 integers, one per line as redis-cli prints them (the clock last).
  const auto lines = [](const std::string& reply) {
    std::vector<std::string> out;
    std::istringstream in(reply);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  const auto reserve = [&](const std::string& prefix, std::size_t from, std::size_t count) {
    std::vector<std::string> args = {"EVAL", script, std::to_string(2 * count)};
    for (std::size_t i = from; i < from + count; ++i) {
      args.push_back(fmt::format("{}k{}", prefix, i));
      args.push_back(fmt::format("{}rec{}", prefix, i));
    }
    args.insert(args.end(), policies.begin(), policies.end());
    args.push_back(std::to_string(count));
    for (std::size_t i = from; i < from + count; ++i) {
      args.insert(args.end(),
                  {"r", std::to_string(policy_of[i]), std::to_string(t), "3", "60000000"});
    }
    return lines(server_->Cli(args));
  };
  const auto settle = [&](const std::string& prefix, std::size_t from, std::size_t count) {
    std::vector<std::string> args = {"EVAL", script, std::to_string(count)};
    for (std::size_t i = from; i < from + count; ++i)
      args.push_back(fmt::format("{}rec{}", prefix, i));
    args.insert(args.end(), {"0", std::to_string(count)});
    for (std::size_t i = from; i < from + count; ++i) {
      args.insert(args.end(), {"s", std::to_string(t + 1000), std::to_string(actual_of[i])});
    }
    return lines(server_->Cli(args));
  };
  const std::vector<std::string> reserved = reserve("one:", 0, n);
  ASSERT_EQ(reserved.size(), 7 * n + 1) << ::testing::PrintToString(reserved);
  const std::vector<std::string> together = settle("one:", 0, n);
  ASSERT_EQ(together.size(), 7 * n + 1) << ::testing::PrintToString(together);
  for (std::size_t i = 0; i < n; ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(reserve("alone:", i, 1).size(), 8u);
    const std::vector<std::string> alone = settle("alone:", i, 1);
    ASSERT_EQ(alone.size(), 8u);
    EXPECT_EQ(alone[0], "1");  // settled
    EXPECT_EQ(std::vector<std::string>(together.begin() + 7 * i, together.begin() + 7 * i + 7),
              std::vector<std::string>(alone.begin(), alone.begin() + 7));
  }
}

// ---- failures ------------------------------------------------------------------------

TEST_F(RedisTest, ScriptFlushLosesNoDecision) {
  auto store = OpenRedis(Url());
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:100000/1h");
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, decisions{0};
  std::jthread load([&] {
    for (int i = 0; i < 200'000 && !stop; ++i) {
      auto d = store->Decide({fmt::format("k{}", i % 100), policy, 1, std::nullopt});
      if (!d.ok() || d->degraded || !d->allowed) ++failures;
      ++decisions;
    }
  });
  while (decisions < 200) std::this_thread::yield();
  EXPECT_EQ(server_->Cli({"SCRIPT", "FLUSH"}), "OK\n");
  const int at_flush = decisions;
  while (decisions < at_flush + 200) std::this_thread::yield();
  stop = true;
  load.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(store->redis_stats().noscript_reloads, 1u);
}

TEST_F(RedisTest, DeniedRepeatsComeFromTheDenialCache) {
  auto store = OpenRedis(Url());
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("gcra:1/1h");  // a denial of ~1 h, whenever it runs
  EXPECT_TRUE(store->Decide({"abuser", policy, 1, std::nullopt})->allowed);
  const Decision first = *store->Decide({"abuser", policy, 1, std::nullopt});
  EXPECT_FALSE(first.allowed);
  const auto calls = store->redis_stats().calls;
  for (int i = 0; i < 100; ++i) {
    const Decision again = *store->Decide({"abuser", policy, 1, std::nullopt});
    EXPECT_FALSE(again.allowed);
    EXPECT_FALSE(again.degraded);
    EXPECT_LE(again.retry_after, first.retry_after);
    EXPECT_GT(again.retry_after.count(), 0);
  }
  EXPECT_EQ(store->redis_stats().calls, calls);  // no round trip
  EXPECT_EQ(store->redis_stats().denial_cache_hits, 100u);
  // A different cost is a different request: it goes to Redis.
  EXPECT_FALSE(store->Decide({"abuser", policy, 0, std::nullopt})->degraded);
  EXPECT_EQ(store->redis_stats().calls, calls + 1);
}

TEST_F(RedisTest, ClientPauseAnswersDegradedWithinTheTimeout) {
  auto store = OpenRedis(Url("timeout=50ms&on_error=fail_closed"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("gcra:1000/1s");
  ASSERT_FALSE(store->Decide({"k", policy, 1, std::nullopt})->degraded);
  server_->Cli({"CLIENT", "PAUSE", "1000", "ALL"});
  int degraded = 0;
  milliseconds slowest{0};
  for (int i = 0; i < 20; ++i) {
    const auto begin = Steady::now();
    const Decision d = *store->Decide({fmt::format("k{}", i), policy, 1, std::nullopt});
    slowest = std::max(slowest, std::chrono::duration_cast<milliseconds>(Steady::now() - begin));
    degraded += d.degraded;
    if (d.degraded) {
      EXPECT_FALSE(d.allowed);  // fail_closed
    }
  }
  EXPECT_EQ(degraded, 20);
  // Timeout + the sweep's tick + scheduling on a loaded machine (sanitizers, parallel
  // tests); what must never happen is waiting out the 1 s pause.
  EXPECT_LE(slowest, milliseconds(50 + 150));
  EXPECT_TRUE(store->redis_stats().breaker_open);  // most of them never reached Redis
  server_->Cli({"CLIENT", "UNPAUSE"});
}

TEST(RedisFailure, RestartDegradesThenRecoversWithinASecond) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto store = OpenRedis(server->url("timeout=50ms&on_error=local"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:1000000/1h");
  ASSERT_FALSE(store->Decide({"k", policy, 1, std::nullopt})->degraded);

  server->Kill();
  for (int i = 0; i < 50; ++i) {
    const auto begin = Steady::now();
    const Decision d = *store->Decide({"k", policy, 1, std::nullopt});
    EXPECT_LE(Steady::now() - begin, milliseconds(50 + 150));  // timeout + scheduling margin
    EXPECT_TRUE(d.degraded);
    EXPECT_TRUE(d.allowed);  // the local limiter decides, and has room
  }
  ASSERT_TRUE(server->Restart());
  const auto answered = TimeUntilRedisAnswers(*store, "k", policy, std::chrono::seconds(3));
  ASSERT_TRUE(answered.has_value());
  EXPECT_LE(*answered, std::chrono::seconds(1));
  EXPECT_GE(store->redis_stats().reconnects, 1u);
}

TEST(RedisFailure, AConnectionThatStopsAnsweringIsReplaced) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto store = OpenRedis(server->url("timeout=20ms&connections=1"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("gcra:1000/1s");
  ASSERT_FALSE(store->Decide({"k", policy, 1, std::nullopt})->degraded);
  // Paused past the stall limit (max(1 s, 20 x timeout)): the store must not wait on the
  // silent connection forever.
  server->Cli({"CLIENT", "PAUSE", "1800", "ALL"});
  const auto paused = Steady::now();
  while (Steady::now() - paused < std::chrono::milliseconds(1600)) {
    EXPECT_TRUE(store->Decide({"k", policy, 1, std::nullopt})->degraded);
  }
  EXPECT_GE(store->redis_stats().reconnects, 1u);
  EXPECT_TRUE(TimeUntilRedisAnswers(*store, "k", policy, std::chrono::seconds(5)).has_value());
}

TEST(RedisFailure, EachOnErrorModeAnswersAsConfigured) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto open = OpenRedis(server->url("on_error=fail_open"));
  auto closed = OpenRedis(server->url("on_error=fail_closed"));
  auto local = OpenRedis(server->url("on_error=local"));
  ASSERT_TRUE(open && closed && local);
  server->Kill();
  const Policy policy = *Policy::Parse("fixed_window:2/1h");
  for (int i = 0; i < 3; ++i) {
    const Decision o = *open->Decide({"k", policy, 1, std::nullopt});
    EXPECT_TRUE(o.degraded && o.allowed);
    const Decision c = *closed->Decide({"k", policy, 1, std::nullopt});
    EXPECT_TRUE(c.degraded && !c.allowed);
    EXPECT_GT(c.retry_after.count(), 0);
    // The local limiter applies the same policy to the same key: 2 of 3 pass.
    const Decision l = *local->Decide({"k", policy, 1, std::nullopt});
    EXPECT_TRUE(l.degraded);
    EXPECT_EQ(l.allowed, i < 2) << i;
    EXPECT_EQ(l.remaining, i < 2 ? 1 - i : 0) << i;
  }
  EXPECT_EQ(local->redis_stats().degraded, 3u);
}

// floodgate's HTTP service on a Redis store, with one rule, `api`: requests for /api,
// one limit per client IP.
struct ServiceOnRedis {
  std::shared_ptr<RedisStore> store;
  std::unique_ptr<server::Service> service;
};
ServiceOnRedis StartService(RedisServer& redis, const std::string& options,
                            const std::string& policy) {
  ServiceOnRedis out;
  out.store = OpenRedis(redis.url(options));
  auto config = server::ParseConfig(
      fmt::format("rules:\n  - {{name: api, match: {{path_prefix: /api}}, identify: ip, "
                  "policy: '{}'}}\n",
                  policy),
      "t.yaml");
  if (out.store == nullptr || !config.ok()) return {};
  out.service = std::make_unique<server::Service>(
      out.store, std::make_shared<const server::ServerConfig>(*config));
  return out;
}

// What /metrics shows while Redis is down and on_error=local answers.
TEST(RedisFailure, MetricsShowDegradedAnswersErrorsAndTheLocalLimitersKeys) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  const ServiceOnRedis running =
      StartService(*server, "timeout=50ms&on_error=local", "fixed_window:2/1h");
  ASSERT_NE(running.service, nullptr);
  server::Service& service = *running.service;
  const auto call = [&](const char* target, const char* uri) {
    server::Request request(boost::beast::http::verb::get, target, 11);
    if (uri != nullptr) request.set("X-Original-URI", uri);
    std::promise<server::Response> answer;
    service.Handle(request, boost::asio::ip::make_address("192.0.2.1"),
                   [&](server::Response r) { answer.set_value(std::move(r)); });
    return answer.get_future().get();
  };
  EXPECT_EQ(call("/v1/authz", "/api").result_int(), 204);  // from Redis
  // The log, captured: degraded answers are reported at most once a second, with a count.
  std::ostringstream log;
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  const auto began = Steady::now();
  server->Kill();
  // The local limiter applies the rule from scratch: 2 allowed, then denials.
  std::vector<int> statuses;
  for (int i = 0; i < 4; ++i) statuses.push_back(call("/v1/authz", "/api").result_int());
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(Steady::now() - began);
  spdlog::set_default_logger(previous);
  EXPECT_THAT(statuses, ::testing::ElementsAre(204, 204, 429, 429));
  std::istringstream lines(log.str());
  int reports = 0;
  for (std::string line; std::getline(lines, line);) {
    reports += line.find("answered by on_error since the last report") != std::string::npos;
  }
  EXPECT_GE(reports, 1) << log.str();
  EXPECT_LE(reports, 1 + seconds.count()) << log.str();
  const std::string text = call("/metrics", nullptr).body;
  EXPECT_THAT(text, HasSubstr("floodgate_decisions_total{rule=\"api\",result=\"allowed\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("floodgate_decisions_total{rule=\"api\",result=\"degraded\"} 4\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("floodgate_store_errors_total [1-9]"));
  EXPECT_THAT(text, HasSubstr("floodgate_memory_keys 1\n"));  // the local limiter's key
  EXPECT_THAT(
      text, ::testing::ContainsRegex("floodgate_build_info\\{version=\"[^\"]+\",store=\"redis://"));
}

// SIGTERM's graceful shutdown: a request the store is still answering (Redis paused) is
// answered before the server stops; nothing new is accepted meanwhile.
TEST(RedisFailure, ShutdownFinishesARequestTheStoreIsStillAnswering) {
  namespace beast = boost::beast;
  namespace asio = boost::asio;
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  const ServiceOnRedis running =
      StartService(*server, "timeout=5s&denial_cache=0us", "gcra:100/1s");
  ASSERT_NE(running.service, nullptr);
  RedisStore* store = running.store.get();
  server::HttpOptions options;
  options.port = 0;
  options.threads = 1;
  server::HttpServer http(*running.service, options);
  ASSERT_TRUE(http.Start().ok());

  const auto calls = store->redis_stats().calls;
  server->Cli({"CLIENT", "PAUSE", "1000", "ALL"});
  asio::io_context io;
  asio::ip::tcp::socket client(io);
  client.connect({asio::ip::make_address("127.0.0.1"), http.port()});
  beast::http::request<beast::http::empty_body> request(beast::http::verb::get, "/v1/authz", 11);
  request.set(beast::http::field::host, "localhost");
  request.set("X-Original-URI", "/api");
  beast::http::write(client, request);
  // In flight: the script call has gone to the paused Redis.
  const auto sent_by = Steady::now() + std::chrono::seconds(5);
  while (store->redis_stats().calls == calls && Steady::now() < sent_by) std::this_thread::yield();
  ASSERT_GT(store->redis_stats().calls, calls);

  auto shutdown = std::async(std::launch::async, [&] { http.Shutdown(std::chrono::seconds(10)); });
  beast::flat_buffer buffer;
  beast::http::response<beast::http::string_body> response;
  beast::error_code ec;
  beast::http::read(client, buffer, response, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(response.result_int(), 204);  // Redis's answer, once the pause ended
  EXPECT_FALSE(response.keep_alive());    // and the connection closes after it
  EXPECT_EQ(shutdown.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(store->redis_stats().degraded, 0u);
  asio::ip::tcp::socket late(io);
  late.connect({asio::ip::make_address("127.0.0.1"), http.port()}, ec);
  EXPECT_TRUE(ec) << "a connection was accepted after the shutdown";
}

// Close answers what is still waiting (Cancelled), at once; later decisions get on_error.
TEST(RedisClose, AnswersEverythingStillPending) {
  auto server = RedisServer::Start();  // its own: it stays paused
  ASSERT_NE(server, nullptr);
  auto store = OpenRedis(server->url("timeout=10s&on_error=fail_closed"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("gcra:1000/1s");
  ASSERT_FALSE(store->Decide({"k", policy, 1, std::nullopt})->degraded);
  // Long enough that a loaded machine (sanitizers, parallel tests) still submits inside it.
  server->Cli({"CLIENT", "PAUSE", "5000", "ALL"});
  std::vector<std::promise<absl::StatusOr<Decision>>> answers(20);
  for (std::size_t i = 0; i < answers.size(); ++i) {
    store->DecideAsync({fmt::format("k{}", i), policy, 1, std::nullopt},
                       [&answers, i](absl::StatusOr<Decision> d) { answers[i].set_value(d); });
  }
  const auto begin = Steady::now();
  store->Close();
  for (auto& answer : answers) {
    auto got = answer.get_future();
    ASSERT_EQ(got.wait_for(std::chrono::seconds(1)), std::future_status::ready);
    const absl::StatusOr<Decision> result = got.get();
    EXPECT_TRUE(absl::IsCancelled(result.status()))
        << result.status() << (result.ok() && result->degraded ? " (degraded)" : "");
  }
  EXPECT_LT(Steady::now() - begin, std::chrono::seconds(1));  // not the 10 s timeout
  auto after = store->Decide({"k", policy, 1, std::nullopt});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(after->degraded);
  EXPECT_FALSE(after->allowed);
}

TEST(RedisBreaker, AProbeWhoseOutcomeNeverCameIsReplaced) {
  using Clock = redis::Breaker::Clock;
  redis::Breaker breaker(2, milliseconds(100));
  const Clock::time_point t0 = Clock::now();
  breaker.Failure(t0);
  breaker.Failure(t0);
  EXPECT_FALSE(breaker.Allow(t0 + milliseconds(50)));   // open
  EXPECT_TRUE(breaker.Allow(t0 + milliseconds(110)));   // half-open: one probe
  EXPECT_FALSE(breaker.Allow(t0 + milliseconds(120)));  // only one
  EXPECT_TRUE(breaker.Allow(t0 + milliseconds(215)));   // that probe was lost: another
  breaker.Success();
  EXPECT_TRUE(breaker.Allow(t0 + milliseconds(216)));  // closed
  EXPECT_TRUE(breaker.Allow(t0 + milliseconds(217)));
}

TEST(RedisFailure, UnreachableServerIsAClearError) {
  const int port = FreeLoopbackPort();
  auto store =
      RedisStore::Open(*RedisStoreOptions::FromUrl(fmt::format("redis://127.0.0.1:{}", port)));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(std::string(MessageOf(store.status())),
            fmt::format("redis unreachable at 127.0.0.1:{}: connection refused", port));
}

// lazy_connect (what `floodgate serve` uses): the store opens with no Redis there, says
// why in Health(), answers every decision by on_error within the timeout, and switches
// to Redis within a second of it answering, deciding exactly from then on.
TEST(RedisLazyConnect, OpensWithoutRedisThenSwitchesWithinASecondOfItAnswering) {
  const int port = FreeLoopbackPort();
  auto opened = RedisStore::Open(*RedisStoreOptions::FromUrl(
      fmt::format("redis://127.0.0.1:{}?lazy_connect=1&on_error=fail_closed&timeout=50ms", port)));
  ASSERT_TRUE(opened.ok()) << opened.status();
  RedisStore& store = **opened;
  const absl::Status health = store.Health();
  EXPECT_EQ(std::string(MessageOf(health)),
            fmt::format("redis unreachable at 127.0.0.1:{}: connection refused", port));
  EXPECT_FALSE(store.Ping());
  const Policy policy = *Policy::Parse("fixed_window:5/1h");
  // Redis stays away for 1.5 s, long enough for the reconnect backoff to reach its cap
  // (500 ms): decisions meanwhile, a few hundred at most.
  const auto down_until = Steady::now() + milliseconds(1500);
  for (int i = 0; i < 300 && Steady::now() < down_until; ++i) {
    const auto begin = Steady::now();
    const auto d = store.Decide({"k", policy, 1, std::nullopt});
    EXPECT_LE(Steady::now() - begin, milliseconds(50 + 150));  // timeout + scheduling margin
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(d->degraded);
    EXPECT_FALSE(d->allowed);                      // fail_closed
    std::this_thread::sleep_for(milliseconds(5));  // pacing the load, not synchronisation
  }

  auto server = RedisServer::Start({}, port);
  ASSERT_NE(server, nullptr);
  const auto answered = TimeUntilRedisAnswers(store, "probe", policy, std::chrono::seconds(3));
  ASSERT_TRUE(answered.has_value());
  EXPECT_LE(*answered, std::chrono::seconds(1));
  EXPECT_TRUE(store.Health().ok()) << store.Health();
  EXPECT_TRUE(store.Ping());
  for (int i = 0; i < 8; ++i) {
    const auto d = store.Decide({"exact", policy, 1, std::nullopt});
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_FALSE(d->degraded);
    EXPECT_EQ(d->allowed, i < 5) << i;
  }
  EXPECT_EQ(server->Cli({"EXISTS", "fg:fw:exact"}), "1\n");
}

// Without lazy_connect (the library's default, and `floodgate check` / `replay`), a store
// with no Redis is an error at once, as before.
TEST(RedisLazyConnect, OffByDefaultSoOpenFailsFast) {
  const int port = FreeLoopbackPort();
  const auto begin = Steady::now();
  auto store = RedisStore::Open(
      *RedisStoreOptions::FromUrl(fmt::format("redis://127.0.0.1:{}?lazy_connect=0", port)));
  EXPECT_FALSE(store.ok());
  EXPECT_LE(Steady::now() - begin, std::chrono::seconds(1));
  EXPECT_FALSE(RedisStoreOptions::FromUrl("redis://h:1?lazy_connect=yes").ok());
}

// ---- authentication --------------------------------------------------------------------

TEST(RedisAuth, PasswordAndAclUser) {
  auto server = RedisServer::Start({"--requirepass", "s3cret"});
  ASSERT_NE(server, nullptr);
  const Policy policy = *Policy::Parse("gcra:10/1s");
  const std::string base = fmt::format("127.0.0.1:{}", server->port());

  auto ok = OpenRedis("redis://:s3cret@" + base);
  ASSERT_NE(ok, nullptr);
  EXPECT_TRUE(ok->Decide({"k", policy, 1, std::nullopt})->allowed);

  auto wrong = RedisStore::Open(*RedisStoreOptions::FromUrl("redis://:nope@" + base));
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(std::string(MessageOf(wrong.status())), HasSubstr("refused AUTH"));
  EXPECT_THAT(std::string(MessageOf(wrong.status())), HasSubstr("WRONGPASS"));
  EXPECT_THAT(std::string(MessageOf(wrong.status())), ::testing::Not(HasSubstr("nope")));

  auto none = RedisStore::Open(*RedisStoreOptions::FromUrl("redis://" + base));
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(MessageOf(none.status())), HasSubstr("needs a password"));

  server->Cli({"-a", "s3cret", "--no-auth-warning", "ACL", "SETUSER", "limiter", "on",
               ">pa:ss@word", "~*", "+@all"});
  auto user = OpenRedis("redis://limiter:pa%3Ass%40word@" + base + "/2");
  ASSERT_NE(user, nullptr);
  EXPECT_TRUE(user->Decide({"k", policy, 1, std::nullopt})->allowed);
  EXPECT_EQ(server->Cli({"-a", "s3cret", "--no-auth-warning", "-n", "2", "EXISTS", "fg:gcra:k"}),
            "1\n");
}

// A reply announcing a huge array is refused before anything is allocated for it (hiredis
// would allocate the element table up front); ordinary replies still parse.
TEST(RespReader, RefusesHugeArraysAndReadsTheRest) {
  redis::ReplyReader reader;
  const auto feed = [&](std::string_view bytes) { return reader.Feed(bytes.data(), bytes.size()); };
  ASSERT_TRUE(feed("*2\r\n:1\r\n$2\r\nok\r\n").ok());
  auto reply = reader.Next();
  ASSERT_TRUE(reply.ok());
  ASSERT_NE(*reply, nullptr);
  EXPECT_EQ((*reply)->elements, 2u);
  ASSERT_TRUE(feed("*900000000\r\n").ok());
  auto huge = reader.Next();
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("900000000 elements"));
}

// Commands are formatted by our own code (resp.cc says why): byte for byte what hiredis's
// formatter makes, for random binary arguments of every length class.
TEST(RespFormat, SameBytesAsHiredis) {
  std::mt19937 random(7);
  for (int round = 0; round < 500; ++round) {
    std::vector<std::string> owned(std::uniform_int_distribution<int>(0, 12)(random));
    for (auto& arg : owned) {
      const int length_class = std::uniform_int_distribution<int>(0, 3)(random);
      const std::size_t size =
          length_class == 0   ? 0
          : length_class == 1 ? std::uniform_int_distribution<int>(1, 9)(random)
          : length_class == 2 ? std::uniform_int_distribution<int>(10, 200)(random)
                              : std::uniform_int_distribution<int>(1000, 70'000)(random);
      for (std::size_t i = 0; i < size; ++i) arg.push_back(static_cast<char>(random()));
    }
    std::vector<std::string_view> args(owned.begin(), owned.end());
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    char* theirs = nullptr;
    const int size =
        redisFormatCommandArgv(&theirs, static_cast<int>(argv.size()), argv.data(), lengths.data());
    ASSERT_GT(size, 0);
    std::string ours = "prefix";
    redis::AppendCommand(ours, args);
    EXPECT_EQ(ours, "prefix" + std::string(theirs, static_cast<std::size_t>(size))) << round;
    redisFreeCommand(theirs);
  }
}

TEST(RedisUrl, ParsesAndRejects) {
  auto o = RedisStoreOptions::FromUrl(
      "redis://u:p%40ss@[::1]:7000/3?timeout=20ms&on_error=fail_open&connections=4&batch=32");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->user, "u");
  EXPECT_EQ(o->password, "p@ss");
  EXPECT_EQ(o->host, "::1");
  EXPECT_EQ(o->port, 7000);
  EXPECT_EQ(o->db, 3);
  EXPECT_EQ(o->timeout, milliseconds(20));
  EXPECT_EQ(o->on_error, OnError::kFailOpen);
  EXPECT_EQ(o->connections, 4);
  EXPECT_EQ(o->max_batch, 32);
  EXPECT_EQ(o->Describe(), "redis://u:***@[::1]:7000/3");
  for (const char* bad : {"redis://", "redis://h:0", "redis://h:70000", "redis://h:1/x",
                          "redis://h?timeout=5", "redis://h?on_error=maybe", "redis://h?batch=0",
                          "redis://h?colour=red", "http://h", "redis://%zz@h"}) {
    EXPECT_FALSE(RedisStoreOptions::FromUrl(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace floodgate::testing

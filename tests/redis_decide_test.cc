// The Redis store deciding against a real redis-server.
//
// The conformance vectors one call per decision and batched, exact capacity under contention, state
// sizes, TTLs, the denial cache.
#include <absl/time/civil_time.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>

#include "redis_test_fixture.h"

namespace floodgate::testing {
namespace {

TEST_F(RedisTest, ConformanceVectorsOneCallPerDecision) {
  auto store = OpenRedis(Url("batch=1"));
  ASSERT_NE(store, nullptr);
  ExpectVectorsOneCallPerDecision(*store);
}

// Under a PreparedPolicy a Redis store decides as under a DecideRequest (Store's default
// DecidePreparedValidated): the same vectors, the same answers.
TEST_F(RedisTest, ConformanceVectorsThroughPreparedPolicies) {
  auto store = OpenRedis(Url("batch=1"));
  ASSERT_NE(store, nullptr);
  const auto cases = LoadAllVectors();
  ASSERT_GE(cases.size(), 60u);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    RunCase(*store, cases[i], fmt::format("p{}:", i), PolicyForm::kPrepared);
  }
  EXPECT_EQ(store->redis_stats().degraded, 0u);
}

TEST_F(RedisTest, ConformanceVectorsBatched) {
  auto store = OpenRedis(Url("connections=1&batch=7"));
  ASSERT_NE(store, nullptr);
  ExpectVectorsBatched(*store, *server_);
}

// Calendar windows at the server's clock (docs/algorithms.md: the script chooses the window
// by its TIME among the bounds the store sends): a full day's denial waits until the next
// local midnight in the zone, here one 14 hours east of UTC, so no UTC day lines up.
TEST_F(RedisTest, CalendarWindowDecidesAtTheServerClock) {
  auto store = OpenRedis(Url("batch=1&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:1/1d,tz=Pacific/Kiritimati");
  absl::TimeZone zone;
  ASSERT_TRUE(absl::LoadTimeZone("Pacific/Kiritimati", &zone));
  const absl::Time before = absl::Now();
  ASSERT_TRUE(store->Decide({"tz-server-clock", policy, 1, std::nullopt}).value().allowed);
  const auto denied = store->Decide({"tz-server-clock", policy, 1, std::nullopt});
  const absl::Time after = absl::Now();
  ASSERT_TRUE(denied.ok()) << denied.status();
  if (absl::ToCivilDay(before, zone) != absl::ToCivilDay(after, zone)) {
    GTEST_SKIP() << "the day ended during the test";
  }
  const absl::Time midnight = zone.At(absl::CivilSecond(absl::ToCivilDay(after, zone) + 1)).pre;
  EXPECT_FALSE(denied->allowed);
  EXPECT_GE(denied->retry_after.count(), absl::ToInt64Microseconds(midnight - after) - 1'000'000);
  EXPECT_LE(denied->retry_after.count(), absl::ToInt64Microseconds(midnight - before) + 1'000'000);
  EXPECT_EQ(denied->reset_after, denied->retry_after);
}

// Time going back past the windows the store sent bounds for (an explicit now replayed
// days out of order): the script cannot know where the stored window starts, so it
// answers an error naming the cause instead of guessing, and the store answers by
// on_error (memory:// clamps to the stored window's start, which it can compute;
// docs/algorithms.md, "Calendar windows").
TEST_F(RedisTest, CalendarWindowRefusesTimeGoingBackPastTheBounds) {
  auto store = OpenRedis(Url("batch=1&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:3/1d,tz=UTC");
  const TimePoint day0{std::chrono::microseconds(1'836'489'600'000'000)};
  ASSERT_TRUE(store->Decide({"tz-back", policy, 1, day0 + std::chrono::days(5)}).ok());
  // One window back: within the bounds, clamped to the stored window as memory:// does.
  const auto back_one = store->Decide({"tz-back", policy, 1, day0 + std::chrono::days(4)});
  ASSERT_TRUE(back_one.ok()) << back_one.status();
  EXPECT_EQ(back_one->remaining, 1);
  EXPECT_FALSE(back_one->degraded);
  // Five back: the script's error, which the store answers by on_error (degraded).
  const std::uint64_t errors = store->redis_stats().errors;
  const auto back_five = store->Decide({"tz-back", policy, 1, day0});
  ASSERT_TRUE(back_five.ok()) << back_five.status();
  EXPECT_TRUE(back_five->degraded);
  EXPECT_EQ(store->redis_stats().errors, errors + 1);
}

// gcra in whole µs: a same-instant burst admits exactly B, one call per decision and
// batched (the whole burst in flight at once).
TEST_F(RedisTest, SameInstantGcraBurstsAdmitExactlyB) {
  // A burst of up to 1,000 in flight at once: the timeout leaves room for a slow tree.
  auto single = OpenRedis(Url("batch=1&denial_cache=0us&timeout=60s"));
  ASSERT_NE(single, nullptr);
  ExpectSameInstantGcraBurstsAdmitExactlyB(*single, "single:");
  auto batched = OpenRedis(Url("connections=1&batch=64&denial_cache=0us&timeout=60s"));
  ASSERT_NE(batched, nullptr);
  const std::size_t decisions = ExpectSameInstantGcraBurstsAdmitExactlyB(
      *batched, "batched:", HoldingScriptCalls({server_.get()}));
  // All but the few that went before Redis held the calls.
  EXPECT_GE(batched->redis_stats().batched_decisions, decisions * 9 / 10) << decisions;
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

// sliding_log stores runs (docs/algorithms.md, revision 2): one sorted-set member per admission
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

TEST_F(RedisTest, EveryAlgorithmAdmitsExactlyItsCapacityUnderContention) {
  auto store = OpenRedis(Url("denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  ExpectExactCapacityUnderContention(*store);
  EXPECT_GT(store->redis_stats().batched_decisions, 0u);
}

// At the start of the current minute: every key then lives at least 12 s (a unit of
// 5/1m), where on the clock a key of a window ending in the next few milliseconds would
// be gone before it is counted.
TEST_F(RedisTest, EveryKeyWrittenHasATtl) {
  auto store = OpenRedis(Url());
  ASSERT_NE(store, nullptr);
  const TimePoint now(std::chrono::floor<std::chrono::minutes>(SystemNow().time_since_epoch()));
  for (const char* text : {"gcra:5/1m", "token_bucket:5/1m", "token_bucket:5/1m,refill=interval",
                           "sliding_log:5/1m", "sliding_window:5/1m", "fixed_window:5/1m"}) {
    const Policy policy = *Policy::Parse(text);
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(store->Decide({fmt::format("k{}", i % 7), policy, 1 + i % 3, now}).ok());
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

// A blocked answer's retry_after is max(the block's end, the algorithm's wait): the cache
// cannot tell when its answers stop being `blocked`, so Redis answers each.
TEST_F(RedisTest, BlockedDenialsAreNotCachedAndSayBlocked) {
  auto store = OpenRedis(Url());
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:1/1h,block=1m");
  EXPECT_TRUE(store->Decide({"blocked", policy, 1, std::nullopt})->allowed);
  for (int i = 0; i < 3; ++i) {
    const Decision d = *store->Decide({"blocked", policy, 1, std::nullopt});
    EXPECT_FALSE(d.allowed);
    EXPECT_TRUE(d.blocked) << i;
  }
  EXPECT_EQ(store->redis_stats().denial_cache_hits, 0u);
}

// sliding_log keeps blocked_until in its sorted set (lua/sliding_log.lua): the block's start
// raises the key's TTL to cover it, well past the log's P, and a settle that writes a new
// run while the key is blocked (its reservation's run has left the log) keeps it covered.
// Explicit times, so TTLs floor at 60 s: a block of 1 h stands out from that.
TEST_F(RedisTest, SlidingLogBlockIsCoveredByTheKeysTtl) {
  auto store = OpenRedis(Url("batch=1&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("sliding_log:2/1s,block=1h");
  const std::string key = "t:RedisTest.SlidingLogBlockIsCoveredByTheKeysTtl:sl:k";
  const auto pttl_ms = [&] { return std::stoll(server_->Cli({"PTTL", key})); };
  const TimePoint t0{microseconds(1'700'000'000'000'000)};
  const auto reserved = store->Reserve(ReserveRequest{"k", policy, 1, kDefaultHold, t0});
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  ASSERT_TRUE(reserved->decision.allowed);
  ASSERT_TRUE(store->Decide({"k", policy, 1, t0})->allowed);
  EXPECT_LE(pttl_ms(), 60'000);
  const Decision denied = *store->Decide({"k", policy, 1, t0});
  EXPECT_TRUE(denied.blocked);
  EXPECT_GT(pttl_ms(), 3'590'000);
  // At t0 + 1.5 s the runs at t0 have left: the overcharge of 2 is a new run at that time.
  const auto settled =
      store->Settle(SettleRequest{reserved->id, 3, t0 + std::chrono::milliseconds(1500)});
  ASSERT_TRUE(settled.ok()) << settled.status();
  EXPECT_EQ(settled->remaining, 0);
  EXPECT_GT(pttl_ms(), 3'590'000);
  const Decision still = *store->Decide({"k", policy, 1, t0 + std::chrono::seconds(2)});
  EXPECT_TRUE(still.blocked);
  EXPECT_EQ(still.retry_after, std::chrono::seconds(3598));
}

// A rule that drops its block (a config reload) decides on the log as it is: the block's
// member is no run, and nothing reads it as an unreadable state. Back on the block, the
// key is still blocked.
TEST_F(RedisTest, SlidingLogWithoutItsBlockStepsOverTheBlock) {
  auto store = OpenRedis(Url("batch=1&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy blocking = *Policy::Parse("sliding_log:2/1m,block=1h");
  const Policy plain = *Policy::Parse("sliding_log:2/1m");
  const TimePoint t0{microseconds(1'700'000'000'000'000)};
  ASSERT_TRUE(store->Decide({"k", blocking, 1, t0})->allowed);
  ASSERT_TRUE(store->Decide({"k", blocking, 1, t0 + std::chrono::seconds(10)})->allowed);
  ASSERT_TRUE(store->Decide({"k", blocking, 1, t0 + std::chrono::seconds(20)})->blocked);
  // Without the block: the oldest unit (t0) leaves at t0 + 1m.
  Decision d = *store->Decide({"k", plain, 1, t0 + std::chrono::seconds(30)});
  EXPECT_FALSE(d.allowed);
  EXPECT_FALSE(d.blocked);
  EXPECT_FALSE(d.degraded);
  EXPECT_EQ(d.retry_after, std::chrono::seconds(30));
  EXPECT_EQ(d.reset_after, std::chrono::seconds(40));
  d = *store->Decide({"k", plain, 1, t0 + std::chrono::seconds(65)});
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  // The block, from t0 + 20s, lasts until t0 + 1h20s.
  d = *store->Decide({"k", blocking, 1, t0 + std::chrono::seconds(80)});
  EXPECT_FALSE(d.allowed);
  EXPECT_TRUE(d.blocked);
  EXPECT_FALSE(d.degraded);
  EXPECT_EQ(d.retry_after, std::chrono::seconds(3540));
}

// A rule that drops its block= (a config reload) while keys are blocked: every algorithm
// then decides on the key's state as if there were no block (decisions, a peek that finds
// the state fresh again, a reserve and its settle, a take), keeps the block while it lasts,
// and meets it again when the option comes back, on Redis as on memory://, answer for
// answer. (Redis appends blocked_until to a string state: a policy without block= must
// not take that for an unreadable state.)
TEST_F(RedisTest, EveryAlgorithmWithoutItsBlockStepsOverTheBlockAsMemoryDoes) {
  auto redis = OpenRedis(Url("batch=1&denial_cache=0us"));
  ASSERT_NE(redis, nullptr);
  auto memory = OpenStore("memory://");
  ASSERT_TRUE(memory.ok()) << memory.status();
  const TimePoint t0{microseconds(1'700'000'000'000'000)};
  const auto at = [&](int seconds) { return t0 + std::chrono::seconds(seconds); };
  const auto expect_same = [](const Decision& got, const Decision& want, const std::string& where) {
    EXPECT_FALSE(got.degraded) << where;
    EXPECT_EQ(got.allowed, want.allowed) << where;
    EXPECT_EQ(got.remaining, want.remaining) << where;
    EXPECT_EQ(got.retry_after, want.retry_after) << where;
    EXPECT_EQ(got.reset_after, want.reset_after) << where;
    EXPECT_EQ(got.blocked, want.blocked) << where;
  };
  for (const std::string spec :
       {"gcra:2/1m", "token_bucket:2/1m", "token_bucket:2/1m,refill=interval", "fixed_window:2/1m",
        "sliding_window:2/1m", "sliding_log:2/1m"}) {
    SCOPED_TRACE(spec);
    const Policy blocking = *Policy::Parse(spec + ",block=1h");
    const Policy plain = *Policy::Parse(spec);
    const std::string key = "dropped:" + spec;
    enum class Op { kDecide, kReserveThenSettle, kTake };
    struct Step {
      const Policy& policy;
      Op op;
      std::int64_t cost;
      int second;
    };
    // The block starts at +20 s and lasts until +1h20s. At +200 s every state is fresh again
    // (a full bucket, past windows): a peek there may leave the block alone on the key.
    const std::vector<Step> steps = {
        {blocking, Op::kDecide, 1, 0},  {blocking, Op::kDecide, 1, 10},
        {blocking, Op::kDecide, 1, 20}, {plain, Op::kDecide, 1, 30},
        {plain, Op::kDecide, 0, 30},    {plain, Op::kDecide, 1, 65},
        {plain, Op::kDecide, 1, 66},    {plain, Op::kDecide, 0, 200},
        {plain, Op::kDecide, 1, 201},   {plain, Op::kReserveThenSettle, 1, 202},
        {blocking, Op::kDecide, 1, 210}, {blocking, Op::kDecide, 0, 210},
        {plain, Op::kTake, 2, 220}};
    for (const Step& step : steps) {
      const std::string where = fmt::format("{} at +{}s, op {}, cost {}", step.policy.ToString(),
                                            step.second, static_cast<int>(step.op), step.cost);
      if (step.op == Op::kDecide) {
        const DecideRequest request{key, step.policy, step.cost, at(step.second)};
        const auto want = (*memory)->Decide(request);
        const auto got = redis->Decide(request);
        ASSERT_TRUE(want.ok() && got.ok()) << where << want.status() << got.status();
        expect_same(*got, *want, where);
        if (step.second == 210) {
          EXPECT_TRUE(got->blocked) << where << ": the block was kept";
        }
        continue;
      }
      absl::StatusOr<Reservation> want, got;
      if (step.op == Op::kTake) {
        const TakeRequest request{key, step.policy, step.cost, milliseconds(100), at(step.second)};
        want = (*memory)->Take(request);
        got = redis->Take(request);
      } else {
        const ReserveRequest request{key, step.policy, step.cost, kDefaultHold, at(step.second)};
        want = (*memory)->Reserve(request);
        got = redis->Reserve(request);
      }
      ASSERT_TRUE(want.ok() && got.ok()) << where << want.status() << got.status();
      expect_same(got->decision, want->decision, where);
      EXPECT_EQ(got->units, want->units) << where;
      if (step.op == Op::kReserveThenSettle) {
        ASSERT_FALSE(got->id.empty()) << where;
        const auto settled_want =
            (*memory)->Settle(SettleRequest{want->id, 2, at(step.second + 1)});
        const auto settled_got = redis->Settle(SettleRequest{got->id, 2, at(step.second + 1)});
        ASSERT_TRUE(settled_want.ok() && settled_got.ok())
            << where << settled_want.status() << settled_got.status();
        expect_same(*settled_got, *settled_want, where + ", settled at 2");
      }
    }
  }
}

}  // namespace
}  // namespace floodgate::testing

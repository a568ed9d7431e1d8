// Multi-decisions (docs/multi.md) on a real redis-server.
//
// The vectors, batches shared with single decisions, on_error, the denial cache, leases under
// contention.
#include <future>

#include "redis_test_fixture.h"

namespace floodgate::testing {
namespace {

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

// Leases taken in steps (docs/leases.md, "In a multi-decision"), many in flight: never
// more than the tighter limit, and the denied requests leave nothing held or spent.
TEST_F(RedisTest, LeasesInAMultiDecisionAreExactUnderContention) {
  auto store = OpenRedis(Url("denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  ExpectExactLeasesUnderContention(*store, "");
}

}  // namespace
}  // namespace floodgate::testing

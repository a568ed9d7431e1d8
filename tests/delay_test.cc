// delay=D on memory://: the Decision and its JSON, what it is refused with, and Limiter::Wait.
//
// The answers themselves are the conformance vectors' (tests/vectors/delay_*.json); the
// guarantee is delay_model_test.cc's.
#include <floodgate/limiter.h>
#include <floodgate/memory_store.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <vector>

#include "common/strings.h"
#include "hang_guard.h"
#include "test_time.h"

namespace floodgate {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using Steady = std::chrono::steady_clock;

// A limiter over memory:// whose clock stands still at T0, so the store's answers are fixed
// whatever the machine's speed; only the waits run in real time.
Limiter FrozenLimiter() {
  MemoryStoreOptions options;
  options.clock = [] { return TimePoint(microseconds(T0)); };
  return Limiter(std::make_unique<MemoryStore>(std::move(options)));
}

Policy P(const char* text) { return Policy::Parse(text).value(); }

TEST(Delay, DecisionJsonCarriesDelayOnlyUnderDelay) {
  Limiter limiter = FrozenLimiter();
  const Policy policy = P("gcra:10/1s,burst=1,delay=1s");
  const Decision first = *limiter.Check("k", policy);
  EXPECT_EQ(ToJson(first), R"({"allowed":true,"limit":10,"remaining":0,"retry_after_us":0,)"
                           R"("reset_after_us":100000,"delay_us":0})");
  const Decision second = *limiter.Check("k", policy);
  EXPECT_TRUE(second.allowed);
  EXPECT_EQ(second.delay, milliseconds(100));
  EXPECT_THAT(ToJson(second), HasSubstr(R"("delay_us":100000)"));
  EXPECT_THAT(ToJson(*limiter.Check("plain", P("gcra:10/1s"))), ::testing::Not(HasSubstr("delay")));
}

TEST(Delay, RefusedWhereTheScheduleIsNotKept) {
  Limiter limiter = FrozenLimiter();
  const Policy policy = P("gcra:10/1s,delay=1s");
  // A multi-decision under delay= takes no lease (Redis makes it in a step of its own).
  const CheckItem items[] = {{"a", policy, 1, "a"}, {"b", P("concurrency:5"), 1, "b"}};
  EXPECT_THAT(std::string(MessageOf(limiter.CheckAll(items).status())),
              HasSubstr("a multi-decision under delay= does not take yet"));
  EXPECT_THAT(std::string(MessageOf(limiter.Reserve("a", policy, 1).status())),
              HasSubstr("reservations are not for delay= yet"));
  EXPECT_THAT(std::string(MessageOf(limiter.store().Take({"a", policy, 2}).status())),
              HasSubstr("cannot be prefetched"));
  EXPECT_THAT(
      std::string(MessageOf(
          limiter.Wait("a", P("fixed_window:1/1s"), Steady::now() + milliseconds(5)).status())),
      HasSubstr("only gcra, token_bucket and sliding_log can wait"));
}

TEST(Delay, SyncWaitReturnsTheAdmissionAfterItsDelay) {
  Limiter limiter = FrozenLimiter();
  const Policy policy = P("gcra:100/1s,burst=1,delay=1s");  // E = 10 ms
  const auto deadline = Steady::now() + floodgate::testing::kHangGuard;
  ASSERT_EQ(limiter.Wait("k", policy, deadline)->delay.count(), 0);
  const Steady::time_point asked = Steady::now();
  const absl::StatusOr<Decision> second = limiter.Wait("k", policy, deadline);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->allowed);
  EXPECT_EQ(second->delay, milliseconds(10));
  // What the call is for (not a speed claim): it does not return before the slot.
  EXPECT_GE(Steady::now() - asked, second->delay);
}

TEST(Delay, WaitIsDeniedAtOnceBeyondTheDeadlineAndChargesNothing) {
  Limiter limiter = FrozenLimiter();
  const Policy policy = P("gcra:10/1s,burst=1,delay=1h");  // E = 100 ms
  ASSERT_TRUE(limiter.Check("k", policy)->allowed);
  const absl::StatusOr<Decision> denied =
      limiter.Wait("k", policy, Steady::now() + milliseconds(20));
  ASSERT_TRUE(denied.ok()) << denied.status();
  EXPECT_FALSE(denied->allowed);
  EXPECT_GT(denied->retry_after.count(), 0);
  // Nothing charged: the next slot is still the one 100 ms ahead.
  EXPECT_EQ(limiter.Check("k", policy)->delay, milliseconds(100));
}

TEST(Delay, AsyncWaitersQueueOnOneTimerInTheirOrder) {
  Limiter limiter = FrozenLimiter();
  const Policy policy = P("gcra:1000/1s,burst=1,delay=1s");  // E = 1 ms
  constexpr int kWaiters = 200;
  std::vector<std::future<absl::StatusOr<Decision>>> futures;
  for (int i = 0; i < kWaiters; ++i) {
    futures.push_back(
        limiter.WaitFuture("k", policy, Steady::now() + floodgate::testing::kHangGuard));
  }
  for (int i = 0; i < kWaiters; ++i) {
    ASSERT_EQ(futures[i].wait_for(floodgate::testing::kHangGuard), std::future_status::ready) << i;
    const absl::StatusOr<Decision> d = futures[i].get();
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(d->allowed) << i;
    EXPECT_EQ(d->delay, milliseconds(i)) << i;  // first come, first served
  }
  // Past delay=: denied at once through the callback, nothing queued.
  const Policy short_delay = P("gcra:1000/1s,burst=1,delay=5ms");
  auto denied =
      limiter.WaitFuture("k", short_delay, Steady::now() + floodgate::testing::kHangGuard);
  ASSERT_EQ(denied.wait_for(floodgate::testing::kHangGuard), std::future_status::ready);
  EXPECT_FALSE(denied.get()->allowed);
}

TEST(Delay, WaitAllReturnsAfterTheCommonStart) {
  Limiter limiter = FrozenLimiter();
  const CheckItem items[] = {{"k", P("gcra:100/1s,burst=1,delay=1s"), 1, "fast"},  // E = 10 ms
                             {"k", P("token_bucket:50/1s,burst=1,delay=1s"), 1, "slow"}};  // 20 ms
  const auto deadline = Steady::now() + floodgate::testing::kHangGuard;
  ASSERT_EQ(limiter.WaitAll(items, deadline)->delay.count(), 0);
  const Steady::time_point asked = Steady::now();
  const absl::StatusOr<MultiDecision> second = limiter.WaitAll(items, deadline);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->allowed);
  EXPECT_EQ(second->delay, milliseconds(20));  // the bucket's start
  EXPECT_GE(Steady::now() - asked, second->delay);
  // Async: the same schedule, on the timer.
  std::promise<absl::StatusOr<MultiDecision>> third;
  limiter.WaitAllAsync(items, deadline, [&third](absl::StatusOr<MultiDecision> d) {
    third.set_value(std::move(d));
  });
  auto answer = third.get_future();
  ASSERT_EQ(answer.wait_for(floodgate::testing::kHangGuard), std::future_status::ready);
  const absl::StatusOr<MultiDecision> got = answer.get();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->delay, milliseconds(40));
  // A deadline nearer than the common start: denied at once, nothing charged.
  const absl::StatusOr<MultiDecision> denied =
      limiter.WaitAll(items, Steady::now() + milliseconds(30));
  ASSERT_TRUE(denied.ok()) << denied.status();
  EXPECT_FALSE(denied->allowed);
  EXPECT_EQ(limiter.CheckAll(items)->delay, milliseconds(60));
  // A window cannot wait.
  const CheckItem window[] = {{"k", P("fixed_window:5/1s"), 1, "w"}};
  EXPECT_THAT(std::string(MessageOf(limiter.WaitAll(window, deadline).status())),
              HasSubstr("items[0]: fixed_window:5/1s: only gcra"));
}

TEST(Delay, AsyncWaitersHearCancelledWhenTheLimiterCloses) {
  std::future<absl::StatusOr<Decision>> waiting;
  {
    Limiter limiter = FrozenLimiter();
    const Policy policy = P("gcra:1/1h,burst=1,delay=1h");
    ASSERT_TRUE(limiter.Check("k", policy)->allowed);
    waiting = limiter.WaitFuture("k", policy, Steady::now() + std::chrono::hours(2));
  }
  ASSERT_EQ(waiting.wait_for(floodgate::testing::kHangGuard), std::future_status::ready);
  EXPECT_EQ(waiting.get().status().code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace floodgate

// Operating a key (docs/algorithms.md, "Operating a key") beyond the vectors: the bounds of a
// penalty, the requests refused, the Limiter's calls, a block through every operation.

#include "core/operate.h"

#include <floodgate/limiter.h>
#include <floodgate/memory_store.h>
#include <gtest/gtest.h>

namespace floodgate {
namespace {

const TimePoint kT{std::chrono::microseconds(1'700'000'000'000'000)};

Policy P(std::string_view text) {
  auto policy = Policy::Parse(text);
  EXPECT_TRUE(policy.ok()) << text << ": " << policy.status();
  return *policy;
}

// The largest penalty on the slowest policies stays within a settle's overcharge: no
// overflow, a finite wait, and the key still answers.
TEST(Operate, TheLargestPenaltyIsBoundedLikeAnOvercharge) {
  for (const char* text :
       {"gcra:1/366d", "token_bucket:1/366d", "token_bucket:1/366d,refill=interval",
        "fixed_window:1/366d", "sliding_window:1/366d", "sliding_log:1/366d"}) {
    MemoryStore store;
    const Policy policy = P(text);
    for (int i = 0; i < 3; ++i) {  // again on top: still capped
      auto d = store.Operate({"k", policy, KeyOperation::kPenalize, kMaxCost, kT});
      ASSERT_TRUE(d.ok()) << text << ": " << d.status();
      EXPECT_TRUE(d->allowed) << text;  // a peek
      EXPECT_EQ(d->remaining, 0) << text;
      EXPECT_GT(d->reset_after.count(), 0) << text;
      EXPECT_LE(d->reset_after.count(),
                core::kMaxSettleWaitUs + 2 * policy.capacity() * policy.period.count())
          << text;
    }
    auto denied = store.Decide({"k", policy, 1, kT});
    ASSERT_TRUE(denied.ok());
    EXPECT_FALSE(denied->allowed) << text;
    EXPECT_GT(denied->retry_after.count(), 0) << text;
  }
}

TEST(Operate, RefusesWhatIsNoOperation) {
  MemoryStore store;
  const Policy gcra = P("gcra:10/1s");
  const auto code = [&](const OperateRequest& request) {
    return store.Operate(request).status().code();
  };
  EXPECT_EQ(code({"k", gcra, KeyOperation::kRefund, 0, kT}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({"k", gcra, KeyOperation::kPenalize, kMaxCost + 1, kT}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({"k", gcra, KeyOperation::kReset, 1, kT}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({"", gcra, KeyOperation::kReset, 0, kT}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code({std::string(kMaxKeyBytes + 1, 'k'), gcra, KeyOperation::kReset, 0, kT}),
            absl::StatusCode::kInvalidArgument);
  const absl::Status lease =
      store.Operate({"k", P("concurrency:3"), KeyOperation::kRefund, 1, kT}).status();
  EXPECT_EQ(lease.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(lease.message().find("Release"), std::string_view::npos) << lease;
}

// The store's own clock, through the Limiter: a login guard counting failures only.
TEST(Operate, TheLimitersCallsOnTheStoresClock) {
  auto limiter = Limiter::Open("memory://");
  ASSERT_TRUE(limiter.ok());
  const Policy login = P("sliding_log:3/15m");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(limiter->Check("alice", login)->allowed);
  EXPECT_FALSE(limiter->Check("alice", login)->allowed);
  auto reset = limiter->Reset("alice", login);
  ASSERT_TRUE(reset.ok()) << reset.status();
  EXPECT_EQ(reset->remaining, 3);
  EXPECT_EQ(reset->reset_after.count(), 0);
  ASSERT_TRUE(limiter->Check("alice", login, 3)->allowed);
  EXPECT_EQ(limiter->Refund("alice", login, 2)->remaining, 2);
  EXPECT_EQ(limiter->Penalize("alice", login, 5)->remaining, 0);
  EXPECT_FALSE(limiter->Check("alice", login)->allowed);
  const auto at = limiter->OperateAt(SystemNow(), "alice", login, KeyOperation::kRefund, 100);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->remaining, 3);
}

// A block stays through a refund and a penalty, and goes with a reset, whatever the
// policy says now: a rule that dropped block= still resets its old block.
TEST(Operate, AResetRemovesABlockEvenUnderAPolicyWithoutOne) {
  MemoryStore store;
  const Policy blocking = P("fixed_window:1/1s,block=1h");
  ASSERT_TRUE(store.Decide({"k", blocking, 1, kT})->allowed);
  ASSERT_TRUE(store.Decide({"k", blocking, 1, kT})->blocked);
  auto refunded = store.Operate({"k", blocking, KeyOperation::kRefund, 1, kT});
  ASSERT_TRUE(refunded.ok());
  EXPECT_TRUE(refunded->blocked);
  EXPECT_EQ(refunded->reset_after, std::chrono::hours(1));
  EXPECT_TRUE(store.Decide({"k", blocking, 1, kT})->blocked);
  ASSERT_TRUE(store.Operate({"k", P("fixed_window:1/1s"), KeyOperation::kReset, 0, kT}).ok());
  auto after = store.Decide({"k", blocking, 1, kT});
  EXPECT_TRUE(after->allowed);
  EXPECT_FALSE(after->blocked);
}

// A refund of many units walks the log's runs from the newest, no further than the log.
TEST(Operate, ARefundSplitsTheRunItEndsIn) {
  core::SlidingLog log;
  const Policy policy = P("sliding_log:100/1s");
  const std::int64_t t = 1'000'000'000;
  for (int i = 0; i < 10; ++i) log.Append(t + i, 3);
  Decision d;
  EXPECT_GT(core::OperateSlidingLog(policy, log, t + 10, KeyOperation::kRefund, 7, d), 0);
  EXPECT_EQ(log.units(), 23);
  EXPECT_EQ(log.runs(), 8u);
  EXPECT_EQ(log.newest().time, t + 7);
  EXPECT_EQ(log.newest().count, 2);
  EXPECT_EQ(d.remaining, 77);
  EXPECT_EQ(core::OperateSlidingLog(policy, log, t + 10, KeyOperation::kRefund, kMaxCost, d), 0);
  EXPECT_TRUE(log.empty());
}

}  // namespace
}  // namespace floodgate

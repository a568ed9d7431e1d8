// Unit tests per algorithm (docs/algorithms.md), through the Limiter and the pure core.
//
// The Limiter runs on memory:// with explicit times; the pure core functions are checked directly.
#include "core/algorithms.h"

#include <floodgate/limiter.h>
#include <floodgate/memory_store.h>
#include <gtest/gtest.h>

#include "test_time.h"

namespace floodgate {
namespace {

using std::chrono::microseconds;

class AlgorithmTest : public ::testing::Test {
 protected:
  Decision At(std::int64_t t, const char* policy, std::int64_t cost = 1, const char* key = "k") {
    auto p = Policy::Parse(policy);
    EXPECT_TRUE(p.ok()) << p.status();
    auto d = limiter_.CheckAt(TimePoint(microseconds(t)), key, *p, cost);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.value_or(Decision{});
  }
  static void Expect(const Decision& d, bool allowed, std::int64_t remaining, std::int64_t retry_us,
                     std::int64_t reset_us) {
    EXPECT_EQ(d.allowed, allowed);
    EXPECT_EQ(d.remaining, remaining);
    EXPECT_EQ(d.retry_after.count(), retry_us);
    EXPECT_EQ(d.reset_after.count(), reset_us);
  }
  Limiter limiter_{std::make_unique<MemoryStore>()};
};

// ---- gcra ----------------------------------------------------------------------------

constexpr const char* kGcra = "gcra:10/1s,burst=5";  // E = 100000 µs, tau = 500000 µs

TEST_F(AlgorithmTest, GcraBurstOfExactlyB) {
  for (int i = 1; i <= 5; ++i) {
    SCOPED_TRACE(i);
    Expect(At(T0, kGcra), true, 5 - i, 0, i * 100'000);
  }
  Expect(At(T0, kGcra), false, 0, 100'000, 500'000);
}

TEST_F(AlgorithmTest, GcraSteadyRateAfterBurst) {
  for (int i = 0; i < 5; ++i) At(T0, kGcra);
  for (int n = 1; n <= 20; ++n) {
    SCOPED_TRACE(n);
    const std::int64_t due = T0 + n * 100'000;
    Expect(At(due - 1, kGcra), false, 0, 1, 400'001);
    Expect(At(due, kGcra), true, 0, 0, 500'000);
  }
}

TEST_F(AlgorithmTest, GcraCostAboveBurstNeverFits) {
  Expect(At(T0, kGcra, 6), false, 5, -1, 0);
  Expect(At(T0, kGcra, 5), true, 0, 0, 500'000);  // nothing was consumed by the -1
}

TEST_F(AlgorithmTest, GcraPeekChangesNothing) {
  Expect(At(T0, kGcra, 0), true, 5, 0, 0);
  At(T0, kGcra, 3);
  Expect(At(T0, kGcra, 0), true, 2, 0, 300'000);
  Expect(At(T0, kGcra, 0), true, 2, 0, 300'000);
  At(T0, kGcra, 2);
  Expect(At(T0, kGcra, 0), true, 0, 0, 500'000);  // a peek is allowed even when exhausted
  Expect(At(T0, kGcra, 1), false, 0, 100'000, 500'000);
}

TEST_F(AlgorithmTest, GcraTimeGoingBackwards) {
  for (int i = 0; i < 5; ++i) At(T0, kGcra);
  const Decision d = At(T0 - 1'000, kGcra);
  Expect(d, false, 0, 101'000, 501'000);
  EXPECT_GE(d.retry_after.count(), 0);
}

// ---- token_bucket ---------------------------------------------------------------------

constexpr const char* kSmooth = "token_bucket:10/1s,burst=5";  // one token per 100000 µs

TEST_F(AlgorithmTest, SmoothBucketBurstThenRate) {
  for (int i = 1; i <= 5; ++i) {
    SCOPED_TRACE(i);
    Expect(At(T0, kSmooth), true, 5 - i, 0, i * 100'000);
  }
  Expect(At(T0, kSmooth), false, 0, 100'000, 500'000);
  Expect(At(T0 + 99'999, kSmooth), false, 0, 1, 400'001);
  Expect(At(T0 + 100'000, kSmooth), true, 0, 0, 500'000);
}

TEST_F(AlgorithmTest, SmoothBucketCostAboveCapacityNeverFits) {
  Expect(At(T0, kSmooth, 6), false, 5, -1, 0);
  Expect(At(T0, kSmooth, 0), true, 5, 0, 0);
}

TEST_F(AlgorithmTest, SmoothBucketTimeBackwardsIsClampedAndNeverRefillsTwice) {
  for (int i = 0; i < 5; ++i) At(T0, kSmooth);
  // 0.5 s in the past: judged at T0, the newest time the bucket has seen.
  Expect(At(T0 - 500'000, kSmooth), false, 0, 100'000, 500'000);
  Expect(At(T0 + 100'000, kSmooth), true, 0, 0, 500'000);
  Expect(At(T0 + 100'000, kSmooth), false, 0, 100'000, 500'000);
}

constexpr const char* kInterval = "token_bucket:2/1s,burst=4,refill=interval";

TEST_F(AlgorithmTest, IntervalBucketRefillsInWholeSteps) {
  Expect(At(T0, kInterval), true, 3, 0, 1'000'000);
  for (int i = 0; i < 3; ++i) At(T0, kInterval);
  Expect(At(T0, kInterval), false, 0, 1'000'000, 2'000'000);
  Expect(At(T0 + 999'999, kInterval), false, 0, 1, 1'000'001);   // a partial period adds nothing
  Expect(At(T0 + 1'000'000, kInterval), true, 1, 0, 2'000'000);  // one period adds exactly L
  Expect(At(T0 + 1'500'000, kInterval), true, 0, 0, 1'500'000);
  // 2.5 periods later: two refills of 2, capped at C = 4; a full bucket restarts its phase.
  Expect(At(T0 + 3'500'000, kInterval), true, 3, 0, 1'000'000);
  Expect(At(T0 + 3'500'000, kInterval, 5), false, 3, -1, 1'000'000);
}

// ---- sliding_log ----------------------------------------------------------------------

TEST_F(AlgorithmTest, SlidingLogEntryExactlyPOldNoLongerCounts) {
  const char* p = "sliding_log:3/1s";
  Expect(At(T0, p), true, 2, 0, 1'000'000);
  Expect(At(T0 + 100, p), true, 1, 0, 1'000'000);
  Expect(At(T0 + 200, p), true, 0, 0, 1'000'000);
  Expect(At(T0 + 300, p), false, 0, 999'700, 999'900);
  Expect(At(T0 + 999'999, p), false, 0, 1, 201);         // T0's entry is P-1 old: counts
  Expect(At(T0 + 1'000'000, p), true, 0, 0, 1'000'000);  // exactly P old: gone
}

TEST_F(AlgorithmTest, SlidingLogRetryFromKthOldestWithSharedTimestamps) {
  const char* p = "sliding_log:5/1s";
  At(T0, p, 3);          // three entries at T0
  At(T0 + 1'000, p, 2);  // two at T0+1000
  // cost 4 needs 4 entries gone: the three at T0 and one at T0+1000.
  Expect(At(T0 + 2'000, p, 4), false, 0, 999'000, 999'000);
  Expect(At(T0 + 2'000, p, 6), false, 0, -1, 999'000);
  Expect(At(T0 + 1'000'999, p, 4), false, 3, 1, 1);  // 1 µs early: only T0's entries left
  Expect(At(T0 + 1'001'000, p, 4), true, 1, 0, 1'000'000);
}

TEST_F(AlgorithmTest, SlidingLogMemoryIsBoundedByTheLimit) {
  // 10,000 admitted units at distinct times still keep at most L entries.
  core::SlidingLog log;
  auto policy = *Policy::Parse("sliding_log:100/1s");
  Decision d;
  for (int i = 0; i < 10'000; ++i) core::DecideSlidingLog(policy, log, T0 + i * 5'000, 1, d);
  EXPECT_LE(log.runs(), 100u);
  EXPECT_LE(log.heap_bytes(), 256 * sizeof(core::SlidingLog::Run));
}

// ---- fixed_window ---------------------------------------------------------------------

TEST_F(AlgorithmTest, FixedWindowBoundaries) {
  const char* p = "fixed_window:3/1s";
  for (int i = 0; i < 3; ++i) Expect(At(T0, p), true, 2 - i, 0, 1'000'000);
  Expect(At(T0, p), false, 0, 1'000'000, 1'000'000);
  Expect(At(T0 + 999'999, p), false, 0, 1, 1);
  Expect(At(T0 + 1'000'000, p), true, 2, 0, 1'000'000);
  Expect(At(T0 + 1'000'000, p, 4), false, 2, -1, 1'000'000);
}

TEST_F(AlgorithmTest, FixedWindowTimeBackwardsDoesNotOpenAFreshWindow) {
  const char* p = "fixed_window:3/1s";
  for (int i = 0; i < 3; ++i) At(T0 + 1'000'000, p);
  // A request stamped in the previous window is judged in the stored one.
  Expect(At(T0 + 5, p), false, 0, 1'000'000, 1'000'000);
}

// ---- sliding_window --------------------------------------------------------------------

TEST_F(AlgorithmTest, SlidingWindowWeighsThePreviousWindow) {
  const char* p = "sliding_window:10/1s";
  for (int i = 0; i < 10; ++i) At(T0, p);
  Expect(At(T0 + 500'000, p), false, 0, 600'000, 1'500'000);
  // Next window, x = 0: estimate = 10 * 1 + 0.  Allowed once prev's weight is 0.9.
  Expect(At(T0 + 1'000'000, p), false, 0, 100'000, 1'000'000);
  Expect(At(T0 + 1'099'999, p), false, 0, 1, 900'001);
  Expect(At(T0 + 1'100'000, p), true, 0, 0, 1'900'000);
}

// ---- the pure functions directly --------------------------------------------------------

TEST(CoreFunctions, GcraDeniedAndPeekNeverAskForAWrite) {
  auto policy = *Policy::Parse(kGcra);
  Decision d;
  const auto fresh = core::DecideGcra(policy, nullptr, T0, 0, d);
  EXPECT_TRUE(d.allowed);
  EXPECT_FALSE(fresh.write.has_value());
  const core::GcraState full{T0 + 500'000};
  const auto denied = core::DecideGcra(policy, &full, T0, 1, d);
  EXPECT_FALSE(d.allowed);
  EXPECT_FALSE(denied.write.has_value());
  const auto allowed = core::DecideGcra(policy, nullptr, T0, 2, d);
  EXPECT_TRUE(d.allowed);
  ASSERT_TRUE(allowed.write.has_value());
  EXPECT_EQ(allowed.write->tat, T0 + 200'000);
  EXPECT_EQ(allowed.ttl_us, 200'000);
}

TEST(CoreFunctions, EveryAlgorithmTtlMatchesResetAfterAndFreshStateIsEquivalent) {
  // A key may be dropped once reset_after has passed: deciding then on the stored state
  // and on no state at all must give the same answer.
  for (const char* text :
       {"gcra:7/1m,burst=3", "token_bucket:3/1s,burst=5",
        "token_bucket:3/1s,burst=5,refill=interval", "fixed_window:5/1s", "sliding_window:5/1s"}) {
    SCOPED_TRACE(text);
    MemoryStore a, b;
    auto policy = *Policy::Parse(text);
    Decision last;
    for (int i = 0; i < 4; ++i) {
      last = *a.Decide({"k", policy, 1, TimePoint(microseconds(T0 + i * 1'000))});
    }
    const std::int64_t later = T0 + 3'000 + last.reset_after.count();
    const Decision on_old_state = *a.Decide({"k", policy, 2, TimePoint(microseconds(later))});
    const Decision on_fresh = *b.Decide({"k", policy, 2, TimePoint(microseconds(later))});
    EXPECT_EQ(on_old_state, on_fresh);
  }
}

}  // namespace
}  // namespace floodgate

// Model check of delay=D on memory://: every admitted request, proceeding at now + delay, is
// one the plain algorithm (the same policy without delay=) admits at that time; for
// multi-decisions, every item of every admitted request, at the request's common start.
//
// docs/algorithms.md, "Waiting (delay=D)", states the guarantee; this draws random traffic,
// bounded by count, and replays the proceed times into a second store deciding the plain policy.
#include <floodgate/memory_store.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>

#include "trials.h"

namespace floodgate {
namespace {

constexpr int kTrialsPerKind = ::floodgate::testing::Trials(300);
constexpr int kRequestsPerTrial = 200;
constexpr std::int64_t kStart = 1'700'000'000'000'000;

std::uint64_t ModelSeed() {
  if (const char* s = std::getenv("FG_DELAY_MODEL_SEED"); s != nullptr) {
    return std::strtoull(s, nullptr, 10);
  }
  return std::random_device{}();
}

struct Kind {
  const char* name;
  const char* algorithm;  // the policy string's head
  Refill refill = Refill::kSmooth;
};

// A random valid policy of the kind, with a delay of 1 ms to 4 periods (at most 1 h).
Policy RandomPolicy(std::mt19937_64& rng, const Kind& kind) {
  const auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const std::int64_t limit = pick(1, 20);
  // gcra: a period that L divides, so E is exact and Validate keeps it.
  const std::int64_t period_ms = limit * pick(5, 100);
  std::string text = fmt::format("{}:{}/{}ms", kind.algorithm, limit, period_ms);
  if (kind.refill == Refill::kInterval) text += ",refill=interval";
  if (std::string_view(kind.algorithm).starts_with("gcra") ||
      std::string_view(kind.algorithm).starts_with("token_bucket")) {
    if (pick(0, 1) == 1) text += fmt::format(",burst={}", pick(1, 2 * limit));
  }
  text += fmt::format(",delay={}ms", pick(1, std::min<std::int64_t>(4 * period_ms, 3'600'000)));
  auto policy = Policy::Parse(text);
  EXPECT_TRUE(policy.ok()) << text << ": " << policy.status();
  return *policy;
}

Policy Plain(Policy policy) {
  policy.delay = std::chrono::microseconds(0);
  return policy;
}

TimePoint At(std::int64_t us) { return TimePoint(std::chrono::microseconds(us)); }

class DelayModel : public ::testing::TestWithParam<Kind> {};

TEST_P(DelayModel, AdmittedRequestsProceedingAtTheirDelayConformToThePlainPolicy) {
  const std::uint64_t seed = ModelSeed();
  std::cout << "delay model check " << GetParam().name << ": seed " << seed
            << " (FG_DELAY_MODEL_SEED=" << seed << " replays it)\n";
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  MemoryStore delayed;
  MemoryStore plain;
  std::int64_t admitted = 0, postponed = 0, denied = 0;
  for (int trial = 0; trial < kTrialsPerKind && !HasFailure(); ++trial) {
    const Policy policy = RandomPolicy(rng, GetParam());
    const Policy without = Plain(policy);
    const std::string key = fmt::format("k{}", trial);
    const std::int64_t capacity =
        policy.algorithm == Algorithm::kSlidingLog ? policy.limit : policy.capacity();
    std::int64_t now = kStart;
    std::int64_t last_start = 0;
    for (int i = 0; i < kRequestsPerTrial; ++i) {
      // Bursts (gap 0) and pauses, about twice the rate; mostly cost 1, some up to one more
      // than ever fits.
      const auto pick = [&](std::int64_t lo, std::int64_t hi) {
        return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
      };
      now += pick(0, 3) == 0 ? 0 : pick(1, policy.period.count() / policy.limit);
      const std::int64_t cost = pick(0, 3) == 0 ? pick(1, capacity + 1) : 1;
      const auto d = delayed.Decide({key, policy, cost, At(now)});
      ASSERT_TRUE(d.ok()) << d.status();
      const std::string where = fmt::format("seed {} trial {} ({}) request {} at +{} us cost {}",
                                            seed, trial, policy.ToString(), i, now - kStart, cost);
      ASSERT_TRUE(d->delayable) << where;
      if (!d->allowed) {
        ++denied;
        EXPECT_EQ(d->delay.count(), 0) << where;
        EXPECT_TRUE(d->retry_after.count() > 0 || d->retry_after == Decision::kNever) << where;
        EXPECT_EQ(d->retry_after == Decision::kNever, cost > capacity) << where;
        continue;
      }
      ASSERT_LE(d->delay, policy.delay) << where;
      ASSERT_GE(d->delay.count(), 0) << where;
      if (d->delay.count() > 0) {
        ++postponed;
        EXPECT_EQ(d->remaining, 0) << where;
      }
      ++admitted;
      const std::int64_t start = now + d->delay.count();
      ASSERT_GE(start, last_start) << where << ": first come, first served";
      last_start = start;
      const auto p = plain.Decide({key, without, cost, At(start)});
      ASSERT_TRUE(p.ok()) << p.status();
      ASSERT_TRUE(p->allowed) << where << ": proceeding at +" << start - kStart
                              << " us, the plain policy denies it (retry " << p->retry_after.count()
                              << " us)";
    }
  }
  std::cout << "  " << admitted << " admitted (" << postponed << " of them delayed), " << denied
            << " denied\n";
  // The draw must exercise both branches, or the check proves nothing.
  EXPECT_GT(postponed, 0);
  EXPECT_GT(denied, 0);
}

// Multi-decisions of two or three limits of random kinds (docs/algorithms.md, "Waiting",
// multi-decisions), with single decisions of one of them in between: every admitted
// request's items, proceeding at its common start, are admitted by their plain policies.
// A gcra item charged at a start another item set leaves its key's burst before that start
// to later requests, so a key's proceed times are not always in decision order: they are
// replayed sorted (the plain algorithm judges a schedule, in time order).
TEST(DelayModelMulti, AdmittedItemsProceedingAtTheCommonStartConformToTheirPlainPolicies) {
  const std::uint64_t seed = ModelSeed();
  std::cout << "delay model check of multi-decisions: seed " << seed
            << " (FG_DELAY_MODEL_SEED=" << seed << " replays it)\n";
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  const auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const Kind kinds[] = {{"gcra", "gcra"},
                        {"token_bucket_smooth", "token_bucket"},
                        {"token_bucket_interval", "token_bucket", Refill::kInterval},
                        {"sliding_log", "sliding_log"}};
  MemoryStore delayed;
  MemoryStore plain;
  std::int64_t admitted = 0, postponed = 0, denied = 0;
  for (int trial = 0; trial < kTrialsPerKind && !HasFailure(); ++trial) {
    const std::size_t n = static_cast<std::size_t>(pick(2, 3));
    std::vector<Policy> policies;
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < n; ++i) {
      policies.push_back(RandomPolicy(rng, kinds[pick(0, 3)]));
      keys.push_back(fmt::format("m{}:{}", trial, i));
    }
    struct Proceed {
      std::size_t item;
      std::int64_t start, cost;
    };
    std::vector<Proceed> proceeds;
    std::int64_t now = kStart;
    const std::int64_t step = policies[0].period.count() / policies[0].limit;
    for (int r = 0; r < kRequestsPerTrial; ++r) {
      now += pick(0, 3) == 0 ? 0 : pick(1, step);
      const std::string where =
          fmt::format("seed {} trial {} request {} at +{} us", seed, trial, r, now - kStart);
      if (pick(0, 3) == 0) {  // one limit alone
        const std::size_t i = static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(n) - 1));
        const auto d = delayed.Decide({keys[i], policies[i], 1, At(now)});
        ASSERT_TRUE(d.ok()) << d.status();
        if (d->allowed) proceeds.push_back({i, now + d->delay.count(), 1});
        continue;
      }
      std::vector<CheckItem> items;
      for (std::size_t i = 0; i < n; ++i) {
        items.push_back(CheckItem{keys[i], policies[i], pick(0, 5) == 0 ? pick(1, 3) : 1});
      }
      const auto d = delayed.DecideAll(MultiRequest{items, At(now)});
      ASSERT_TRUE(d.ok()) << where << ": " << d.status();
      if (!d->allowed) {
        ++denied;
        EXPECT_EQ(d->delay.count(), 0) << where;
        EXPECT_FALSE(d->denied_by.empty()) << where;
        continue;
      }
      ++admitted;
      if (d->delay.count() > 0) ++postponed;
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_LE(d->delay, policies[i].delay) << where << ": beyond item " << i << "'s delay";
        EXPECT_EQ(d->items[i].delay, d->delay) << where << ", item " << i;
        proceeds.push_back({i, now + d->delay.count(), items[i].cost});
      }
    }
    std::stable_sort(proceeds.begin(), proceeds.end(),
                     [](const Proceed& a, const Proceed& b) { return a.start < b.start; });
    for (const Proceed& p : proceeds) {
      const auto got = plain.Decide({keys[p.item], Plain(policies[p.item]), p.cost, At(p.start)});
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_TRUE(got->allowed) << "seed " << seed << " trial " << trial << ": item " << p.item
                                << " (" << policies[p.item].ToString() << ") proceeding at +"
                                << p.start - kStart << " us cost " << p.cost
                                << ", the plain policy denies it (retry "
                                << got->retry_after.count() << " us)";
    }
  }
  std::cout << "  " << admitted << " admitted (" << postponed << " of them delayed), " << denied
            << " denied\n";
  EXPECT_GT(postponed, 0);
  EXPECT_GT(denied, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, DelayModel,
    ::testing::Values(Kind{"gcra", "gcra"}, Kind{"token_bucket_smooth", "token_bucket"},
                      Kind{"token_bucket_interval", "token_bucket", Refill::kInterval},
                      Kind{"sliding_log", "sliding_log"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace floodgate

// Many threads on one store: atomic decisions on one key, shard bookkeeping under contention.
//
// The shards' own bookkeeping is insert, expiry and eviction. Also built with ThreadSanitizer by
// `make test`.
#include <floodgate/memory_store.h>
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <string>
#include <thread>
#include <vector>

#include "test_time.h"
#include "trials.h"

namespace floodgate {
namespace {

using std::chrono::microseconds;

constexpr int kThreads = 8;

// Runs `attempts` cost-1 decisions per thread on one key, all threads released at once;
// returns how many were admitted.
std::int64_t Hammer(Store& store, const char* policy_text, int attempts,
                    std::optional<TimePoint> now) {
  const Policy policy = *Policy::Parse(policy_text);
  std::atomic<std::int64_t> admitted{0};
  std::atomic<std::int64_t> errors{0};
  std::barrier start(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        start.arrive_and_wait();
        for (int i = 0; i < attempts; ++i) {
          auto d = store.Decide({"one-key", policy, 1, now});
          if (!d.ok()) {
            ++errors;
          } else if (d->allowed) {
            ++admitted;
          }
        }
      });
    }
  }
  EXPECT_EQ(errors.load(), 0);
  return admitted.load();
}

TEST(Concurrency, FixedWindowAdmitsExactlyTheLimit) {
  MemoryStore store;
  // The real clock: a 1 h window, so a boundary falls inside the run only if the run
  // straddles a full hour; the test then sees two windows' worth and says so.
  const auto before = SystemNow();
  const std::int64_t admitted = Hammer(store, "fixed_window:1000/1h", 2'000, std::nullopt);
  const auto after = SystemNow();
  const auto hour = [](TimePoint t) { return t.time_since_epoch().count() / 3'600'000'000; };
  if (hour(before) == hour(after)) {
    EXPECT_EQ(admitted, 1000);
  } else {
    EXPECT_LE(admitted, 2000) << "the run crossed an hour boundary";
  }
}

struct Bound {
  const char* policy;
  std::int64_t expected;
};

class ExactUnderContention : public ::testing::TestWithParam<Bound> {};

TEST_P(ExactUnderContention, AtOneInstantEveryAlgorithmAdmitsItsCapacity) {
  MemoryStore store;
  EXPECT_EQ(Hammer(store, GetParam().policy, 1'000, TimePoint(microseconds(T0))),
            GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, ExactUnderContention,
    ::testing::Values(Bound{"fixed_window:1000/1h", 1000}, Bound{"sliding_log:1000/1h", 1000},
                      Bound{"sliding_window:1000/1h", 1000}, Bound{"gcra:1000/1h,burst=700", 700},
                      Bound{"token_bucket:1000/1h,burst=700", 700},
                      Bound{"token_bucket:1000/1h,burst=700,refill=interval", 700}),
    [](const ::testing::TestParamInfo<Bound>& info) {
      std::string name = info.param.policy;
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

TEST(Concurrency, ManyKeysWithEvictionAndExpiryStayBounded) {
  // 8 threads, 50,000 keys, room for 2,000: the store evicts from its first few thousand
  // decisions on. A sanitizer run gets a fifth (tests/trials.h): all 160,000 took 12 s.
  constexpr int kDecisionsPerThread = testing::Trials(20'000);
  MemoryStoreOptions options;
  options.max_keys = 2'000;
  options.shards = 16;
  MemoryStore store(options);
  const Policy policies[] = {*Policy::Parse("gcra:5/1ms"), *Policy::Parse("sliding_log:3/1s"),
                             *Policy::Parse("fixed_window:3/1h")};
  std::barrier start(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        for (int i = 0; i < kDecisionsPerThread; ++i) {
          const std::string key = "k" + std::to_string((i * 7919 + t * 104729) % 50'000);
          const auto d = store.Decide({key, policies[i % 3], 1, std::nullopt});
          ASSERT_TRUE(d.ok());
          if (i % 1000 == 0) store.ReclaimExpired(8);
          if (i % 4096 == 0) (void)store.Stats();
        }
      });
    }
  }
  const StoreStats stats = store.Stats();
  EXPECT_LE(stats.keys, 2'000u);
  EXPECT_GT(stats.evictions + stats.expired, 0u);
}

}  // namespace
}  // namespace floodgate

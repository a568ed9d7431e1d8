// Multi-decisions on memory:// (docs/multi.md): input, pollution, exact admission, no deadlock.
//
// Refused input, counter pollution against a limiter that checks limits one after another, exact
// admission from many threads, and no deadlock whatever order the items come in. The vectors run in
// conformance_test.
#include <floodgate/limiter.h>
#include <floodgate/memory_store.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <thread>

#include "common/strings.h"
#include "test_time.h"

namespace floodgate {
namespace {

using std::chrono::microseconds;
using ::testing::HasSubstr;

TEST(MultiRequests, AreRefusedWithTheReason) {
  MemoryStore store;
  const Policy gcra = *Policy::Parse("gcra:10/1s");
  const Policy window = *Policy::Parse("fixed_window:10/1s");
  const auto refused = [&](std::vector<CheckItem> items) {
    auto d = store.DecideAll(MultiRequest{items, std::nullopt});
    EXPECT_FALSE(d.ok());
    return std::string(MessageOf(d.status()));
  };
  EXPECT_THAT(refused({}), HasSubstr("a multi-decision takes 1 to 16 items, got 0"));
  EXPECT_THAT(refused(std::vector<CheckItem>(17, CheckItem{"k", gcra})), HasSubstr("got 17"));
  EXPECT_THAT(refused({{"a", gcra}, {"", gcra}}), HasSubstr("items[1]: key must not be empty"));
  EXPECT_THAT(refused({{"a", gcra}, {"b", gcra, -1}}), HasSubstr("items[1]: cost must be"));
  // Two items on one key under one algorithm would share state.
  EXPECT_THAT(refused({{"a", gcra}, {"b", window}, {"a", *Policy::Parse("gcra:5/1s")}}),
              HasSubstr("items[0] and items[2] share key \"a\" under gcra"));
  // The same key under two algorithms is two states: fine.
  EXPECT_TRUE(
      store
          .DecideAll(MultiRequest{std::vector<CheckItem>{{"a", gcra}, {"a", window}}, std::nullopt})
          .ok());
  // A concurrency item takes one lease or peeks.
  const Policy leases = *Policy::Parse("concurrency:5,lease=30s");
  EXPECT_THAT(refused({{"a", gcra}, {"b", leases, 2}}),
              HasSubstr("items[1]: concurrency:5,lease=30s takes one lease per item: cost 1 "
                        "acquires it, 0 peeks; got 2"));
}

// A multi-decision's leases count against max_reservations like any other: when the
// store holds max_reservations, the request is refused whole, spending nothing.
TEST(MultiLeases, AStoreFullOfReservationsRefusesTheRequestAndSpendsNothing) {
  MemoryStoreOptions options;
  options.shards = 1;
  options.max_reservations = 1;
  MemoryStore store(options);
  const Policy rate = *Policy::Parse("sliding_log:10/1h");
  const Policy leases = *Policy::Parse("concurrency:5,lease=30s");
  const TimePoint now{microseconds(T0)};
  const std::vector<CheckItem> items = {{"r", rate}, {"c", leases}};
  const auto first = store.DecideAll(MultiRequest{items, now});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->held.size(), 1u);
  EXPECT_EQ(first->held[0].item, 1u);
  const auto full = store.DecideAll(MultiRequest{items, now});
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
  const std::vector<CheckItem> peeks = {{"r", rate, 0}, {"c", leases, 0}};
  const auto after = store.DecideAll(MultiRequest{peeks, now});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->items[0].remaining, 9);
  EXPECT_EQ(after->items[1].remaining, 4);
  // Released, the lease makes room again.
  ASSERT_TRUE(store.Release(ReleaseRequest{first->held[0].id, now}).ok());
  EXPECT_TRUE(store.DecideAll(MultiRequest{items, now}).ok());
}

// A client hammering past its per-second limit: all or nothing spends none of its daily
// limit on the requests the burst denies; checking the limits one after another (as most
// gateways do) spends the daily limit on every request the daily check sees.
TEST(MultiDecisions, ADeniedRequestSpendsNoneOfTheOtherLimits) {
  const Policy burst = *Policy::Parse("gcra:10/1s");
  const Policy daily = *Policy::Parse("fixed_window:100/1d");
  Limiter all_or_nothing(std::make_unique<MemoryStore>());
  Limiter one_by_one(std::make_unique<MemoryStore>());
  const std::vector<CheckItem> items = {{"client:daily", daily, 1, "daily"},
                                        {"client:burst", burst, 1, "burst"}};
  std::int64_t admitted = 0, admitted_one_by_one = 0;
  for (int i = 0; i < 1000; ++i) {  // all at one instant: the burst admits 10
    const TimePoint now{microseconds(T0)};
    auto d = all_or_nothing.CheckAllAt(now, items);
    ASSERT_TRUE(d.ok()) << d.status();
    admitted += d->allowed;
    // The first-match way: daily, then burst, each consuming on its own.
    const bool daily_ok = one_by_one.CheckAt(now, "client:daily", daily)->allowed;
    admitted_one_by_one += daily_ok && one_by_one.CheckAt(now, "client:burst", burst)->allowed;
  }
  EXPECT_EQ(admitted, 10);
  EXPECT_EQ(admitted_one_by_one, 10);
  const TimePoint peek{microseconds(T0)};
  EXPECT_EQ(all_or_nothing.CheckAt(peek, "client:daily", daily, 0)->remaining, 90);
  EXPECT_EQ(one_by_one.CheckAt(peek, "client:daily", daily, 0)->remaining, 0);
}

// docs/multi.md: a multi-decision of one item is exactly that item's single decision, for
// every algorithm, shadow or not, at any cost (memory:// decides it by the single path).
TEST(MultiDecisions, OfOneItemAnswerAsTheSingleDecision) {
  for (const char* text :
       {"gcra:5/1s,burst=3", "token_bucket:5/1s", "token_bucket:5/1s,refill=interval",
        "sliding_log:5/1s", "sliding_window:5/1s", "fixed_window:5/1s", "concurrency:3"}) {
    SCOPED_TRACE(text);
    const Policy policy = *Policy::Parse(text);
    const bool lease = policy.algorithm == Algorithm::kConcurrency;
    Limiter multi(std::make_unique<MemoryStore>());
    Limiter single(std::make_unique<MemoryStore>());
    std::int64_t now = T0;
    for (int i = 0; i < 200; ++i) {
      now += (i * 7919) % 400'000;                         // 0 to 0.4 s apart
      const std::int64_t cost = lease ? 0 : (i * 31) % 4;  // a lease is only peeked here
      const bool shadow = i % 3 == 0;
      const TimePoint at{microseconds(now)};
      const CheckItem item{"k", policy, cost, "only", shadow};
      auto m = multi.CheckAllAt(at, std::span<const CheckItem>(&item, 1));
      auto s = single.CheckAt(at, "k", policy, cost);
      ASSERT_TRUE(m.ok() && s.ok()) << i;
      EXPECT_EQ(m->items[0], *s) << i;
      EXPECT_EQ(m->allowed, s->allowed || shadow || cost == 0) << i;
      EXPECT_EQ(m->Summary().remaining, s->remaining) << i;
    }
  }
}

// 8 threads with items in opposite orders on keys spread over many shards: no deadlock,
// and exactly the tighter of two stacked limits is admitted.
TEST(MultiDecisions, ManyThreadsAdmitExactlyTheTighterLimit) {
  MemoryStoreOptions options;
  options.shards = 4;  // few shards: the threads' items keep colliding
  Limiter limiter(std::make_unique<MemoryStore>(options));
  const Policy tight = *Policy::Parse("fixed_window:700/1h");
  const Policy loose = *Policy::Parse("sliding_log:1000/1h");
  const TimePoint now{microseconds(T0)};  // one instant: no window ends during the run
  std::atomic<std::int64_t> admitted{0};
  std::barrier start(8);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        std::vector<CheckItem> items = {
            {"tight", tight}, {"loose", loose}, {"k2", tight, 0}, {"k3", loose, 0}};
        if (t % 2 == 1) std::reverse(items.begin(), items.end());
        start.arrive_and_wait();
        for (int i = 0; i < 500; ++i) admitted += limiter.CheckAllAt(now, items)->allowed;
      });
    }
  }
  EXPECT_EQ(admitted.load(), 700);
  EXPECT_EQ(limiter.CheckAt(now, "loose", loose, 0)->remaining, 300);  // none spent on denials
}

TEST(MultiDecisions, AnswerIsTheBindingItemsDecisionWithTheCombinedWait) {
  Limiter limiter(std::make_unique<MemoryStore>());
  const Policy sec = *Policy::Parse("fixed_window:1/1s");
  const Policy min = *Policy::Parse("fixed_window:2/1m");
  const std::vector<CheckItem> items = {{"s", sec, 1, "sec"}, {"m", min, 1, "min"}};
  const TimePoint t0{microseconds(T0)};
  auto first = limiter.CheckAllAt(t0, items);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->Summary().allowed);
  EXPECT_EQ(first->Summary().limit, 1);  // sec binds: 0 left against min's 1
  EXPECT_EQ(first->Summary().remaining, 0);
  auto second = limiter.CheckAllAt(t0 + microseconds(500'000), items);
  ASSERT_TRUE(second.ok());
  const Decision summary = second->Summary();
  EXPECT_FALSE(summary.allowed);
  EXPECT_EQ(summary.retry_after, microseconds(500'000));
  EXPECT_EQ(summary.limit, 1);
  EXPECT_THAT(second->denied_by, ::testing::ElementsAre(0));
}

}  // namespace
}  // namespace floodgate

// The memory store: state per key and algorithm, expiry, eviction, bounds, long keys, URLs.

#include <floodgate/limiter.h>
#include <floodgate/memory_store.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "common/strings.h"
#include "store/memory/compact_key.h"
#include "test_time.h"

namespace floodgate {
namespace {

using std::chrono::microseconds;
using ::testing::HasSubstr;

// A store whose clock the test moves by hand.
class ManualClockStore {
 public:
  explicit ManualClockStore(std::size_t max_keys = 1'000'000, std::size_t shards = 0) {
    MemoryStoreOptions options;
    options.max_keys = max_keys;
    options.shards = shards;
    options.clock = [this] { return TimePoint(microseconds(now_.load())); };
    store_ = std::make_unique<MemoryStore>(std::move(options));
  }
  Decision Decide(const std::string& key, const char* policy, std::int64_t cost = 1) {
    auto d = store_->Decide({key, *Policy::Parse(policy), cost, std::nullopt});
    EXPECT_TRUE(d.ok()) << d.status();
    return d.value_or(Decision{});
  }
  void Advance(std::int64_t us) { now_ += us; }
  MemoryStore& store() { return *store_; }

 private:
  std::atomic<std::int64_t> now_{T0};
  std::unique_ptr<MemoryStore> store_;
};

TEST(MemoryStore, UsesItsClockWhenNoTimeIsGiven) {
  ManualClockStore s;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(s.Decide("k", "fixed_window:3/1s").allowed);
  EXPECT_FALSE(s.Decide("k", "fixed_window:3/1s").allowed);
  s.Advance(1'000'000);
  EXPECT_TRUE(s.Decide("k", "fixed_window:3/1s").allowed);
}

// Calendar windows (tz=) decide, but neither reserve nor take yet: both refuse clearly
// rather than end a lease or a settle at an epoch-aligned boundary.
TEST(MemoryStore, CalendarWindowsRefuseReservationsAndTakes) {
  ManualClockStore s;
  const Policy policy = *Policy::Parse("fixed_window:3/1d,tz=Europe/Berlin");
  EXPECT_TRUE(s.Decide("k", "fixed_window:3/1d,tz=Europe/Berlin").allowed);
  const auto reserved = s.store().Reserve(ReserveRequest{"k", policy, 1});
  EXPECT_THAT(std::string(MessageOf(reserved.status())),
              HasSubstr("reservations are not for calendar windows (tz=) yet"));
  const auto taken = s.store().Take(TakeRequest{"k", policy, 2});
  EXPECT_THAT(std::string(MessageOf(taken.status())),
              HasSubstr("take is not for calendar windows (tz=) yet"));
}

TEST(MemoryStore, AlgorithmsKeepSeparateStateForTheSameKey) {
  ManualClockStore s;
  EXPECT_TRUE(s.Decide("k", "fixed_window:1/1h").allowed);
  EXPECT_FALSE(s.Decide("k", "fixed_window:1/1h").allowed);
  EXPECT_TRUE(s.Decide("k", "gcra:1/1h").allowed);
  EXPECT_TRUE(s.Decide("k", "token_bucket:1/1h").allowed);
  EXPECT_TRUE(s.Decide("k", "token_bucket:1/1h,refill=interval").allowed);
  EXPECT_TRUE(s.Decide("k", "sliding_log:1/1h").allowed);
  EXPECT_TRUE(s.Decide("k", "sliding_window:1/1h").allowed);
  EXPECT_EQ(s.store().Stats().keys, 6u);
}

TEST(MemoryStore, KeysAreBinarySafeAndLongKeysWork) {
  ManualClockStore s;
  const std::string a("a\0b", 3), b("a\0c", 3);
  const std::string long_a(512, 'x');
  std::string long_b = long_a;
  long_b.back() = 'y';
  for (const auto& key : {a, b, long_a, long_b}) {
    EXPECT_TRUE(s.Decide(key, "fixed_window:1/1h").allowed);
  }
  for (const auto& key : {a, b, long_a, long_b}) {
    EXPECT_FALSE(s.Decide(key, "fixed_window:1/1h").allowed);
  }
  EXPECT_EQ(s.store().Stats().keys, 4u);
}

TEST(MemoryStore, RejectsBadRequestsWithClearErrors) {
  MemoryStore store;
  const Policy policy = *Policy::Parse("gcra:1/1s");
  auto too_long = store.Decide({std::string(513, 'k'), policy, 1, std::nullopt});
  ASSERT_FALSE(too_long.ok());
  EXPECT_THAT(std::string(MessageOf(too_long.status())),
              HasSubstr("key is 513 bytes; the limit is 512"));
  auto empty = store.Decide({"", policy, 1, std::nullopt});
  EXPECT_THAT(std::string(MessageOf(empty.status())), HasSubstr("key must not be empty"));
  auto cost = store.Decide({"k", policy, 1'000'000'001, std::nullopt});
  EXPECT_THAT(std::string(MessageOf(cost.status())), HasSubstr("cost must be between 0 and"));
  auto negative = store.Decide({"k", policy, -1, std::nullopt});
  EXPECT_FALSE(negative.ok());
  Policy bad = policy;
  bad.limit = 0;
  EXPECT_FALSE(store.Decide({"k", bad, 1, std::nullopt}).ok());
  EXPECT_EQ(store.Stats().keys, 0u);
}

TEST(MemoryStore, PeeksAndDenialsOfUnknownKeysStoreNothing) {
  ManualClockStore s;
  for (const char* policy : {"gcra:1/1s", "token_bucket:1/1s", "token_bucket:1/1s,refill=interval",
                             "sliding_log:1/1s", "sliding_window:1/1s", "fixed_window:1/1s"}) {
    SCOPED_TRACE(policy);
    EXPECT_TRUE(s.Decide("peek", policy, 0).allowed);
    EXPECT_FALSE(s.Decide("too-big", policy, 2).allowed);
  }
  EXPECT_EQ(s.store().Stats().keys, 0u);
}

TEST(MemoryStore, ExpiredKeysAreReclaimedIncrementally) {
  ManualClockStore s(1'000'000, 1);
  for (int i = 0; i < 100; ++i) s.Decide("k" + std::to_string(i), "gcra:1/1s");
  EXPECT_EQ(s.store().Stats().keys, 100u);
  EXPECT_EQ(s.store().ReclaimExpired(1000), 0u);  // nothing is fresh yet
  s.Advance(2'000'000);                           // TTL 1 s, rounded up to whole seconds
  // Bounded work per call: 10 keys at a time, never a stop-the-world sweep.
  EXPECT_EQ(s.store().ReclaimExpired(10), 10u);
  EXPECT_EQ(s.store().Stats().keys, 90u);
  // Inserts reclaim as they go: each new key looks at two old ones.
  for (int i = 0; i < 45; ++i) s.Decide("new" + std::to_string(i), "gcra:1/1s");
  EXPECT_EQ(s.store().Stats().keys, 45u);
  EXPECT_EQ(s.store().Stats().expired, 100u);
  EXPECT_EQ(s.store().Stats().evictions, 0u);
}

TEST(MemoryStore, AnExpiredKeyIsDecidedAsFresh) {
  ManualClockStore s(1'000'000, 1);
  EXPECT_TRUE(s.Decide("k", "sliding_log:2/1s", 2).allowed);
  EXPECT_FALSE(s.Decide("k", "sliding_log:2/1s").allowed);
  s.Advance(1'000'000);
  const Decision d = s.Decide("k", "sliding_log:2/1s", 0);
  EXPECT_EQ(d.remaining, 2);
  EXPECT_EQ(s.store().Stats().keys, 0u);  // the peek found it expired and dropped it
}

TEST(MemoryStore, TimesPast2106DecideExactly) {
  // Expiry is kept in 32-bit seconds, which run out in 2106; later times must still
  // decide on the stored state, and times from 2200 on are refused.
  MemoryStore store;
  const Policy policy = *Policy::Parse("fixed_window:1/1h");
  const TimePoint late(microseconds(5'000'000'000'000'000));  // 2128
  EXPECT_TRUE(store.Decide({"k", policy, 1, late})->allowed);
  EXPECT_FALSE(store.Decide({"k", policy, 1, late + microseconds(1)})->allowed);
  auto too_late = store.Decide({"k", policy, 1, kLatestTime});
  ASSERT_FALSE(too_late.ok());
  EXPECT_THAT(std::string(MessageOf(too_late.status())), HasSubstr("before 2200-01-01"));
}

TEST(MemoryStore, NeverHoldsMoreThanMaxKeys) {
  ManualClockStore s(1000, 4);
  for (int i = 0; i < 10'000; ++i) s.Decide("k" + std::to_string(i), "fixed_window:5/1h");
  const StoreStats stats = s.store().Stats();
  EXPECT_LE(stats.keys, 1000u);
  EXPECT_GE(stats.keys, 990u);
  EXPECT_EQ(stats.evictions, 10'000u - stats.keys);
  EXPECT_EQ(stats.expired, 0u);
}

TEST(MemoryStore, EvictsExpiredKeysBeforeLiveOnes) {
  ManualClockStore s(100, 1);
  for (int i = 0; i < 50; ++i) s.Decide("live" + std::to_string(i), "fixed_window:5/1h");
  for (int i = 0; i < 50; ++i) s.Decide("short" + std::to_string(i), "gcra:1/1s");
  s.Advance(2'000'000);  // the 50 short keys are expired, the 50 live ones are not
  for (int i = 0; i < 50; ++i) s.Decide("new" + std::to_string(i), "fixed_window:5/1h");
  const StoreStats stats = s.store().Stats();
  EXPECT_EQ(stats.evictions, 0u);
  EXPECT_EQ(stats.expired, 50u);
  for (int i = 0; i < 50; ++i) {  // every live key kept its count
    EXPECT_EQ(s.Decide("live" + std::to_string(i), "fixed_window:5/1h", 0).remaining, 4) << i;
  }
}

TEST(MemoryStore, EvictsLeastRecentlyUsedFirst) {
  ManualClockStore s(1000, 1);
  const char* policy = "fixed_window:5/1h";
  for (int i = 0; i < 1000; ++i) s.Decide("old" + std::to_string(i), policy);
  for (int i = 0; i < 500; ++i) s.Decide("old" + std::to_string(i), policy);  // used again
  for (int i = 0; i < 400; ++i) s.Decide("new" + std::to_string(i), policy);
  EXPECT_EQ(s.store().Stats().evictions, 400u);
  int kept = 0;
  for (int i = 0; i < 500; ++i)
    kept += s.Decide("old" + std::to_string(i), policy, 0).remaining == 3;
  EXPECT_EQ(kept, 500);  // none of the recently used keys was evicted
}

// A multi-decision evaluates every item before it commits any. Here the first item's
// commit inserts a key into a full shard, which evicts "a" and moves "b" into the slot
// the second item found "a" in: the second item must still be written to "a" (looked up
// again), never over "b".
TEST(MemoryStore, AMultiDecisionCommitsEachItemToItsOwnKeyWhenAnEarlierCommitMovedEntries) {
  ManualClockStore s(2, 1);
  const char* counted = "fixed_window:5/1h";
  s.Decide("a", counted);
  for (int i = 0; i < 3; ++i) s.Decide("b", counted);  // "b": 2 remaining
  const CheckItem items[] = {{"b", *Policy::Parse("gcra:5/1h"), 1, "new", false},
                             {"a", *Policy::Parse(counted), 1, "old", false}};
  auto multi = s.store().DecideAll(MultiRequest{items, std::nullopt});
  ASSERT_TRUE(multi.ok()) << multi.status();
  EXPECT_TRUE(multi->allowed);
  EXPECT_EQ(multi->items[1].remaining, 3);  // "a" decided on its own count
  EXPECT_GE(s.store().Stats().evictions, 1u);
  // "b" (if still held) kept its own count; "a" holds the second item's admission.
  const Decision b = s.Decide("b", counted, 0);
  EXPECT_TRUE(b.remaining == 2 || b.remaining == 5) << b.remaining;
  EXPECT_EQ(s.Decide("a", counted, 0).remaining, 3);
}

std::string LongKey(const char* kind, int i) {
  return kind + std::string(":a-key-long-enough-to-live-in-the-arena:") + std::to_string(i);
}

TEST(MemoryStore, LongKeysKeepTheirStateThroughArenaCompaction) {
  ManualClockStore s(1'000'000, 1);
  for (int i = 0; i < 2000; ++i) {
    s.Decide(LongKey("live", i), "fixed_window:5/1h");
    s.Decide(LongKey("short", i), "gcra:1/1s");
  }
  s.Advance(2'000'000);
  // New keys reclaim the expired ones as they go; their bytes become arena garbage and
  // the arena compacts, moving every live long key.
  for (int i = 0; i < 2000; ++i) s.Decide(LongKey("new", i), "fixed_window:5/1h");
  EXPECT_GE(s.store().Stats().expired, 1900u);
  s.store().ReclaimExpired(10'000);
  EXPECT_EQ(s.store().Stats().expired, 2000u);
  for (int i = 0; i < 2000; ++i) {
    EXPECT_EQ(s.Decide(LongKey("live", i), "fixed_window:5/1h", 0).remaining, 4) << i;
    EXPECT_EQ(s.Decide(LongKey("new", i), "fixed_window:5/1h", 0).remaining, 4) << i;
  }
  EXPECT_EQ(s.store().Stats().keys, 4000u);
}

TEST(MemoryStore, UrlOptions) {
  auto options = MemoryStoreOptions::FromUrl("memory://?max_keys=500&shards=8");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->max_keys, 500u);
  EXPECT_EQ(options->shards, 8u);
  EXPECT_EQ(MemoryStore(*options).Describe(),
            "memory://?max_keys=500&max_bytes=1073741824&max_reservations=1000000&shards=8");
  EXPECT_EQ(
      MemoryStore(*MemoryStoreOptions::FromUrl("memory://?max_keys=3&shards=8")).shard_count(), 2u);

  EXPECT_EQ(MemoryStoreOptions::FromUrl("memory://?max_bytes=65536")->max_bytes, 65536u);
  // Each shard is given at least 4 MiB of max_bytes: 16 MiB makes at most 4 shards.
  EXPECT_EQ(MemoryStore(*MemoryStoreOptions::FromUrl("memory://?max_bytes=16777216&shards=8"))
                .shard_count(),
            4u);
  for (const char* bad : {"memory://?shards=3", "memory://?max_keys=0", "memory://?max_keys=x",
                          "memory://?max_bytes=0", "memory://?max_bytes=1k", "memory://?colour=red",
                          "memory://host", "memory:/"}) {
    EXPECT_FALSE(MemoryStoreOptions::FromUrl(bad).ok()) << bad;
  }
  auto unknown = OpenStore("mongodb://localhost");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(MessageOf(unknown.status())), HasSubstr("unsupported store \"mongodb\""));
}

// Inline keys are compared word by word: every length, and a difference at every byte.
TEST(CompactKey, InlineKeysDifferingInAnyOneByteAreDifferent) {
  memory::KeyArena arena;
  for (std::size_t n = 1; n <= memory::CompactKey::kInlineBytes + 2; ++n) {
    const std::string key(n, 'a');
    const memory::CompactKey compact(1, key, arena);
    EXPECT_TRUE(compact.Equals(1, key)) << n;
    EXPECT_FALSE(compact.Equals(2, key)) << n;
    EXPECT_FALSE(compact.Equals(1, key + "a")) << n;
    for (std::size_t at = 0; at < n; ++at) {
      std::string other = key;
      other[at] = 'b';
      EXPECT_FALSE(compact.Equals(1, other)) << n << " " << at;
    }
  }
}

TEST(KeyArena, CompactsOnceAQuarterIsGarbage) {
  const std::string key(100, 'k');
  memory::KeyArena big;
  for (int i = 0; i < 1000; ++i) big.Store(key);  // 100,000 bytes in 25 blocks of 40 keys
  big.Release(5000);  // 5,000 + 24 unused 96-byte block tails: 7.3% garbage
  EXPECT_FALSE(big.WantsCompaction());

  memory::KeyArena arena;
  for (int i = 0; i < 100; ++i) arena.Store(key);  // 10,000 bytes in 3 blocks
  arena.Release(3000);  // 3,192 bytes of garbage: less than a block is not worth moving
  EXPECT_FALSE(arena.WantsCompaction());
  arena.Release(1000);  // 4,192 of 10,192 bytes: over a quarter
  EXPECT_TRUE(arena.WantsCompaction());
  memory::KeyArena fresh;
  memory::CompactKey inline_key(1, "short", fresh);
  memory::CompactKey long_key(1, key, arena);
  EXPECT_FALSE(inline_key.in_arena());
  EXPECT_TRUE(long_key.in_arena());
  long_key.MoveTo(fresh);
  EXPECT_EQ(long_key.bytes(), key);
  EXPECT_TRUE(long_key.Equals(1, key));
  EXPECT_FALSE(long_key.Equals(2, key));
}

TEST(Limiter, OpensMemoryByDefault) {
  auto limiter = Limiter::Open();
  ASSERT_TRUE(limiter.ok());
  const Policy policy = *Policy::Parse("fixed_window:2/1h");
  EXPECT_TRUE(limiter->Check("user:1", policy)->allowed);
  EXPECT_TRUE(limiter->Check("user:1", policy)->allowed);
  EXPECT_FALSE(limiter->Check("user:1", policy)->allowed);
  EXPECT_EQ(limiter->store().Stats().keys, 1u);
  // The asynchronous form answers inline on memory://, and validates the same way.
  std::optional<absl::StatusOr<Decision>> async;
  limiter->CheckAsync("user:1", policy, 0, [&](absl::StatusOr<Decision> d) { async = d; });
  ASSERT_TRUE(async.has_value() && async->ok());
  EXPECT_EQ((*async)->remaining, 0);
  limiter->CheckAsync("", policy, 1, [&](absl::StatusOr<Decision> d) { async = d; });
  EXPECT_FALSE(async->ok());
}

// A PreparedPolicy skips only the policy's own checks: the key, the cost, the time and the
// peek-only rule of concurrency are checked on every decision, with the same messages.
TEST(Limiter, PreparedPoliciesAreCheckedOnceAndDecideAsPoliciesDo) {
  Policy bad = *Policy::Parse("gcra:1/1s");
  bad.limit = 0;
  const auto refused = PreparedPolicy::Prepare(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(MessageOf(refused.status()), MessageOf(bad.Validate()));
  EXPECT_THAT(std::string(MessageOf(PreparedPolicy::Parse("gcra:0/1s").status())),
              HasSubstr("limit must be between 1 and"));

  auto limiter = Limiter::Open();
  ASSERT_TRUE(limiter.ok());
  const Policy policy = *Policy::Parse("fixed_window:2/1h");
  const PreparedPolicy prepared = *PreparedPolicy::Prepare(policy);
  EXPECT_EQ(prepared.policy(), policy);
  // One state for the key under either form; at one instant, so no window turns between.
  const TimePoint now = SystemNow();
  EXPECT_TRUE(limiter->CheckAt(now, "user:1", prepared)->allowed);
  EXPECT_TRUE(limiter->CheckAt(now, "user:1", policy)->allowed);
  EXPECT_FALSE(limiter->CheckAt(now, "user:1", prepared)->allowed);
  EXPECT_FALSE(limiter->CheckAt(now, "user:1", policy)->allowed);
  EXPECT_EQ(limiter->store().Stats().keys, 1u);

  const auto same_error = [&](std::string_view key, std::int64_t cost) {
    const auto via_prepared = limiter->Check(key, prepared, cost);
    const auto via_policy = limiter->Check(key, policy, cost);
    ASSERT_FALSE(via_prepared.ok()) << key << " cost " << cost;
    EXPECT_EQ(via_prepared.status(), via_policy.status());
  };
  same_error("", 1);
  same_error(std::string(513, 'k'), 1);
  same_error("user:2", -1);
  same_error("user:2", kMaxCost + 1);
  for (const TimePoint out_of_range : {TimePoint(microseconds(-1)), kLatestTime}) {
    const auto via_prepared = limiter->CheckAt(out_of_range, "user:2", prepared);
    EXPECT_FALSE(via_prepared.ok());
    EXPECT_EQ(via_prepared.status(), limiter->CheckAt(out_of_range, "user:2", policy).status());
  }

  const PreparedPolicy leases = *PreparedPolicy::Parse("concurrency:2");
  EXPECT_THAT(std::string(MessageOf(limiter->Check("job", leases).status())),
              HasSubstr("a check may only peek at it (cost 0)"));
  const auto peek = limiter->Check("job", leases, 0);  // at the store's clock
  ASSERT_TRUE(peek.ok()) << peek.status();
  EXPECT_EQ(peek->remaining, 2);
  EXPECT_EQ(limiter->store().Stats().keys, 1u) << "no refused request stored a key";
}

TEST(DecisionJson, MatchesTheServiceSpecShape) {
  Decision d;
  d.allowed = true;
  d.limit = 10;
  d.remaining = 9;
  d.reset_after = microseconds(100'000);
  EXPECT_EQ(
      ToJson(d),
      R"({"allowed":true,"limit":10,"remaining":9,"retry_after_us":0,"reset_after_us":100000})");
  d.degraded = true;
  d.allowed = false;
  d.retry_after = Decision::kNever;
  EXPECT_EQ(
      ToJson(d),
      R"({"allowed":false,"limit":10,"remaining":9,"retry_after_us":-1,"reset_after_us":100000,"degraded":true})");
}

}  // namespace
}  // namespace floodgate

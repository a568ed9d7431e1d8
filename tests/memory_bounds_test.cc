// The memory store's bounds: blocks count as keys; reservations per key and store-wide.

#include <floodgate/limiter.h>
#include <floodgate/memory_store.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "common/strings.h"
#include "core/state_kind.h"
#include "store/memory/shard.h"
#include "test_time.h"

namespace floodgate {
namespace {

using std::chrono::microseconds;
using ::testing::HasSubstr;

const TimePoint kBoundsNow{microseconds(T0)};
// What one key may hold, reservations and leases together: the largest concurrency:N
// (docs/leases.md, docs/security.md).
constexpr std::size_t kHoldsPerKey = 100'000;

MemoryStoreOptions BoundedOptions(std::size_t max_keys, std::size_t shards,
                                  std::size_t max_reservations = 1'000'000) {
  MemoryStoreOptions options;
  options.max_keys = max_keys;
  options.shards = shards;
  options.max_reservations = max_reservations;
  return options;
}

Decision DecideIn(MemoryStore& store, const std::string& key, const Policy& policy, TimePoint now,
                  std::int64_t cost = 1) {
  auto d = store.Decide({key, policy, cost, now});
  EXPECT_TRUE(d.ok()) << d.status();
  return d.value_or(Decision{});
}

// Issue 39, bug 4: distinct 512-byte keys, each blocked for a year, grew the process by
// 425 MB under max_keys=1000 (blocks were a table beside the keys, never bounded). A block
// is a key now: counted in Stats().keys, and evicted under max_keys like any other.
TEST(MemoryBounds, BlocksCountAsKeysAndStayUnderMaxKeys) {
  MemoryStore store(BoundedOptions(1000, 4));
  const Policy blocking = *Policy::Parse("gcra:1/366d,block=366d");
  constexpr int kKeys = 5000;
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = std::to_string(i) + std::string(512 - 8, 'x');
    EXPECT_TRUE(DecideIn(store, key, blocking, kBoundsNow).allowed);
    const Decision denied = DecideIn(store, key, blocking, kBoundsNow);
    EXPECT_FALSE(denied.allowed);
    EXPECT_TRUE(denied.blocked);  // this denial started a block
  }
  const StoreStats stats = store.Stats();
  EXPECT_LE(stats.keys, 1000u);
  // Every state and every block was inserted as a key and left as one: none is held
  // outside the count.
  EXPECT_EQ(stats.keys + stats.evictions + stats.expired, 2u * kKeys);
  // A block held is honoured; once over it is forgotten.
  const std::string last = std::to_string(kKeys - 1) + std::string(512 - 8, 'x');
  EXPECT_TRUE(DecideIn(store, last, blocking, kBoundsNow, 0).blocked);
  const TimePoint after = kBoundsNow + std::chrono::hours(24 * 367);
  const Decision free = DecideIn(store, last, blocking, after);
  EXPECT_TRUE(free.allowed);
  EXPECT_FALSE(free.blocked);
}

// A block inserted by a multi-decision's denied item may evict a key and move another
// into its slot: a later item's peek must still read its own key.
TEST(MemoryBounds, AMultiDecisionPeeksEachItemAtItsOwnKeyAfterABlockMovedEntries) {
  MemoryStore store(BoundedOptions(2, 1));
  const Policy blocking = *Policy::Parse("gcra:1/1h,block=1h");
  const Policy counted = *Policy::Parse("fixed_window:5/1h");
  DecideIn(store, "x", blocking, kBoundsNow);  // slot 0, never used again
  for (int i = 0; i < 2; ++i) DecideIn(store, "y", counted, kBoundsNow);  // slot 1: 3 remaining
  const CheckItem items[] = {{"x", blocking, 1, "blocks", false},
                             {"y", counted, 1, "counted", false}};
  auto multi = store.DecideAll(MultiRequest{items, kBoundsNow});
  ASSERT_TRUE(multi.ok()) << multi.status();
  EXPECT_FALSE(multi->allowed);
  EXPECT_TRUE(multi->items[0].blocked);
  EXPECT_EQ(multi->items[1].remaining, 3);  // "y" peeked at its own count
  EXPECT_EQ(DecideIn(store, "y", counted, kBoundsNow, 0).remaining, 3);
}

// Issue 39, bug 6: a key refused its 3,907th lease (its shard's share of max_reservations
// under 256 shards) where docs/leases.md allows N up to 100,000.
TEST(MemoryBounds, OneKeyHoldsEveryLeaseItsLimitAllows) {
  Limiter limiter(std::make_unique<MemoryStore>(BoundedOptions(1'000'000, 256)));
  const Policy leases = *Policy::Parse("concurrency:100000,lease=1h");
  for (int i = 0; i < 100'000; ++i) {
    auto lease = limiter.AcquireAt(kBoundsNow, "k", leases);
    ASSERT_TRUE(lease.ok()) << i << ": " << lease.status();
    ASSERT_TRUE(lease->decision.allowed) << i;
  }
  auto full = limiter.AcquireAt(kBoundsNow, "k", leases);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_FALSE(full->decision.allowed);  // the limit's own denial, not the store's
  EXPECT_EQ(limiter.store().Stats().reservations, 100'000u);
}

// The key in the same shard as `key` (gcra state) under `shards` shards, other than it.
std::string NeighbourOf(const std::string& key, unsigned shard_bits) {
  const auto shard = [&](const std::string& k) {
    return memory::StateHash(memory::KeyHash(k), core::StateKind::kGcra) >> (64 - shard_bits);
  };
  for (int i = 0;; ++i) {
    std::string other = "other" + std::to_string(i);
    if (shard(other) == shard(key)) return other;
  }
}

// One key's long reserves took its shard's share, and every other key of that shard
// answered 503. A key holds at most kHoldsPerKey; the others keep the rest of
// the store's max_reservations.
TEST(MemoryBounds, OneKeysReservationsLeaveItsShardRoom) {
  Limiter limiter(std::make_unique<MemoryStore>(BoundedOptions(1'000'000, 256)));
  const Policy gcra = *Policy::Parse("gcra:1000000/1s");
  for (std::size_t i = 0; i < kHoldsPerKey; ++i) {
    auto r = limiter.ReserveAt(kBoundsNow, "k", gcra, 1, std::chrono::hours(1));
    ASSERT_TRUE(r.ok()) << i << ": " << r.status();
  }
  auto refused = limiter.ReserveAt(kBoundsNow, "k", gcra, 1, std::chrono::hours(1));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(MessageOf(refused.status()), HasSubstr("100000 reservations and leases"));
  const std::string neighbour = NeighbourOf("k", 8);
  for (int i = 0; i < 10'000; ++i) {
    auto r = limiter.ReserveAt(kBoundsNow, neighbour, gcra, 1, std::chrono::hours(1));
    ASSERT_TRUE(r.ok()) << i << ": " << r.status();
  }
  EXPECT_EQ(limiter.store().Stats().reservations, kHoldsPerKey + 10'000);
  // Once their hold is over the key has room again, and its shard forgets the others.
  const TimePoint later = kBoundsNow + std::chrono::hours(1);
  ASSERT_TRUE(limiter.ReserveAt(later, "k", gcra, 1, std::chrono::hours(1)).ok());
  EXPECT_EQ(limiter.store().Stats().reservations, 1u);
}

// max_reservations bounds the store, not each shard: with 8 shards and 10 reservations
// allowed, any 10 keys hold one each (a shard's share was 1), and expired ones in any
// shard make room for a key of another.
TEST(MemoryBounds, MaxReservationsIsStoreWide) {
  Limiter limiter(std::make_unique<MemoryStore>(BoundedOptions(1'000'000, 8, 10)));
  const Policy gcra = *Policy::Parse("gcra:10/1s");
  for (int i = 0; i < 10; ++i) {
    auto r =
        limiter.ReserveAt(kBoundsNow, "a" + std::to_string(i), gcra, 1, std::chrono::seconds(1));
    ASSERT_TRUE(r.ok()) << i << ": " << r.status();
  }
  auto refused = limiter.ReserveAt(kBoundsNow, "b", gcra, 1, std::chrono::seconds(1));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(MessageOf(refused.status()), HasSubstr("max_reservations (10)"));
  const Policy leases = *Policy::Parse("concurrency:5,lease=1s");
  EXPECT_EQ(limiter.AcquireAt(kBoundsNow, "c", leases).status().code(),
            absl::StatusCode::kResourceExhausted);
  const TimePoint later = kBoundsNow + std::chrono::seconds(1);
  for (int i = 0; i < 10; ++i) {
    auto r = limiter.ReserveAt(later, "b" + std::to_string(i), gcra, 1, std::chrono::seconds(1));
    ASSERT_TRUE(r.ok()) << i << ": " << r.status();
  }
  EXPECT_EQ(limiter.store().Stats().reservations, 10u);
}

// Issue 39's risk: max_keys bounds how many keys, not their bytes, and a sliding log of
// 100,000 runs is 2 MiB. max_bytes bounds the bytes, evicting as max_keys does.
TEST(MemoryBounds, MaxBytesBoundsWhatSlidingLogsHold) {
  MemoryStoreOptions options = BoundedOptions(1'000'000, 1);
  options.max_bytes = std::size_t{1} << 20;
  MemoryStore store(options);
  EXPECT_EQ(store.Describe(),
            "memory://?max_keys=1000000&max_bytes=1048576&max_reservations=1000000&shards=1");
  const Policy log = *Policy::Parse("sliding_log:100000/1d");
  // Ten keys of 5,000 runs each (one per µs): 128 KiB of runs apiece, 1.25 MiB in all.
  for (int k = 0; k < 10; ++k) {
    for (int i = 0; i < 5'000; ++i) {
      ASSERT_TRUE(
          DecideIn(store, "log" + std::to_string(k), log, kBoundsNow + microseconds(i)).allowed);
      ASSERT_LE(store.bytes(), options.max_bytes) << k << ", " << i;
    }
  }
  EXPECT_GE(store.Stats().evictions, 2u);
  EXPECT_GT(store.bytes(), options.max_bytes / 2);
}

// Every byte max_bytes counts comes back: after logs grown, trimmed, replaced, settled,
// released, taken from and evicted, keys long and short, blocks and multi-decisions,
// once every key has expired and been reclaimed the store counts none.
TEST(MemoryBounds, TheBytesCountedReturnToZero) {
  std::atomic<std::int64_t> now{T0};
  MemoryStoreOptions options = BoundedOptions(64, 1);  // small: evictions along the way
  options.clock = [&] { return TimePoint(microseconds(now.load())); };
  MemoryStore store(std::move(options));
  const Policy log = *Policy::Parse("sliding_log:50/1s");
  const Policy leases = *Policy::Parse("concurrency:20,lease=1s");
  const Policy blocking = *Policy::Parse("gcra:5/1s,block=2s");
  for (int i = 0; i < 3000; ++i, now += 997) {
    const std::string key =
        (i % 3 == 0 ? std::string(40, 'l') : std::string("k")) + std::to_string(i % 100);
    const TimePoint at(microseconds(now.load()));
    ASSERT_TRUE(store.Decide({key, log, 1 + i % 3, at}).ok());
    ASSERT_TRUE(store.Decide({key, blocking, 1, at}).ok());
    auto lease = store.Acquire(AcquireRequest{key, leases, at});
    ASSERT_TRUE(lease.ok()) << lease.status();
    if (i % 2 == 0 && !lease->id.empty()) {
      EXPECT_TRUE(store.Release(ReleaseRequest{lease->id, at}).ok());
    }
    auto reserved = store.Reserve(ReserveRequest{key, log, 2, std::chrono::seconds(1), at});
    ASSERT_TRUE(reserved.ok()) << reserved.status();
    if (i % 3 == 0 && !reserved->id.empty()) {
      EXPECT_TRUE(store.Settle(SettleRequest{reserved->id, 1, at}).ok());
    }
    ASSERT_TRUE(store.Take(TakeRequest{key, log, 3, std::chrono::milliseconds(500), at}).ok());
    const CheckItem items[] = {{key, log, 1, "log", false}, {key, blocking, 1, "block", false}};
    ASSERT_TRUE(store.DecideAll(MultiRequest{items, at}).ok());
  }
  EXPECT_GT(store.bytes(), 0u);
  EXPECT_GT(store.Stats().evictions, 0u);
  now += 3'600'000'000;  // an hour: every state, block and lease has ended
  store.ReclaimExpired(1'000'000);
  EXPECT_EQ(store.Stats().keys, 0u);
  EXPECT_EQ(store.bytes(), 0u);
}

}  // namespace
}  // namespace floodgate

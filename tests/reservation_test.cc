// Reservations on memory:// (docs/reservations.md): input, ids, bounds, exact accounting.
//
// Refused input, unknown ids, the bound on reservations held, ids that find their shard, and exact
// accounting when many threads reserve and settle on one key. The vectors run in conformance_test.
#include <floodgate/limiter.h>
#include <floodgate/memory_store.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "common/strings.h"
#include "conformance.h"

namespace floodgate {
namespace {

using std::chrono::microseconds;
using ::testing::HasSubstr;

const TimePoint kT0{microseconds(1'700'000'000'000'000)};

TEST(Reservations, RefuseBadInputWithTheReason) {
  Limiter limiter(std::make_unique<MemoryStore>());
  const Policy gcra = *Policy::Parse("gcra:10/1s");
  const auto reserve_error = [&](std::string_view key, std::int64_t estimate, microseconds hold) {
    auto r = limiter.ReserveAt(kT0, key, gcra, estimate, hold);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(MessageOf(r.status()));
  };
  EXPECT_THAT(reserve_error("k", 0, kDefaultHold), HasSubstr("estimate must be between 1 and"));
  EXPECT_THAT(reserve_error("k", kMaxCost + 1, kDefaultHold), HasSubstr("estimate must be"));
  EXPECT_THAT(reserve_error("k", 1, microseconds(999)), HasSubstr("hold must be between"));
  EXPECT_THAT(reserve_error("k", 1, kMaxHold + microseconds(1)), HasSubstr("hold must be"));
  EXPECT_THAT(reserve_error("", 1, kDefaultHold), HasSubstr("key must not be empty"));

  auto reservation = limiter.ReserveAt(kT0, "k", gcra, 2);
  ASSERT_TRUE(reservation.ok()) << reservation.status();
  auto settled = limiter.SettleAt(kT0, reservation->id, -1);
  EXPECT_THAT(MessageOf(settled.status()), HasSubstr("actual must be between 0 and"));
  settled = limiter.SettleAt(kT0, std::string(kMaxReservationIdBytes + 1, 'a'), 1);
  EXPECT_THAT(
      MessageOf(settled.status()),
      HasSubstr(fmt::format("reservation id must be 1 to {} bytes", kMaxReservationIdBytes)));
  // Refused settles changed nothing: the reservation is still there to settle.
  EXPECT_TRUE(limiter.SettleAt(kT0, reservation->id, 2).ok());
}

TEST(Reservations, UnknownIdsAreNotFoundAndChangeNothing) {
  Limiter limiter(std::make_unique<MemoryStore>());
  const Policy gcra = *Policy::Parse("gcra:10/1s");
  auto reservation = limiter.ReserveAt(kT0, "k", gcra, 4);
  ASSERT_TRUE(reservation.ok()) << reservation.status();
  ASSERT_EQ(reservation->id.size(), 16u);
  std::string other = reservation->id;
  other.back() = other.back() == '0' ? '1' : '0';
  for (const std::string& id :
       {other, std::string("not-an-id"), std::string("0000000000000000"), reservation->id + "0"}) {
    auto settled = limiter.SettleAt(kT0, id, 0);
    EXPECT_EQ(settled.status().code(), absl::StatusCode::kNotFound) << id;
    EXPECT_THAT(MessageOf(settled.status()), HasSubstr("unknown reservation")) << id;
  }
  // The key still carries the estimate: 6 of 10 left.
  auto peek = limiter.CheckAt(kT0, "k", gcra, 0);
  ASSERT_TRUE(peek.ok());
  EXPECT_EQ(peek->remaining, 6);
  EXPECT_TRUE(limiter.SettleAt(kT0, reservation->id, 4).ok());
  auto again = limiter.SettleAt(kT0, reservation->id, 4);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kNotFound);
}

// An id is 16 lowercase hex digits, read strictly: a digit 'f' written another way
// ('F', or a character that is no digit but carries f's low bits) names no reservation.
TEST(Reservations, IdsAreReadAsLowercaseHexOnly) {
  Limiter limiter(std::make_unique<MemoryStore>());
  const Policy gcra = *Policy::Parse("gcra:1000/1s");
  // Random ids: about a third lack an 'f' ((15/16)^16), so 40 all lacking one is ~10^-18.
  std::string id;
  for (int i = 0; i < 40 && id.find('f') == std::string::npos; ++i) {
    auto reservation = limiter.ReserveAt(kT0, "k" + std::to_string(i), gcra, 1);
    ASSERT_TRUE(reservation.ok()) << reservation.status();
    id = reservation->id;
  }
  const std::size_t at = id.find('f');
  ASSERT_NE(at, std::string::npos) << id;
  for (const char other : {'F', 'o', '/'}) {  // 'o' and '/' are 0x6f and 0x2f
    std::string forged = id;
    forged[at] = other;
    auto settled = limiter.SettleAt(kT0, forged, 0);
    EXPECT_EQ(settled.status().code(), absl::StatusCode::kNotFound) << forged;
  }
  EXPECT_TRUE(limiter.SettleAt(kT0, id, 0).ok());
}

// The table every store runs (conformance.h): an id written another way settles nothing.
TEST(Reservations, OnlyItsOwnIdsSettle) {
  MemoryStore store;
  testing::ExpectOnlyItsOwnIdsSettle(store, "");
}

TEST(Reservations, AreBoundedAndNeverDroppedWhileLive) {
  MemoryStoreOptions options;
  options.shards = 1;
  options.max_reservations = 3;
  Limiter limiter(std::make_unique<MemoryStore>(options));
  const Policy gcra = *Policy::Parse("gcra:100/1s");
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto r = limiter.ReserveAt(kT0, "k", gcra, 1, std::chrono::seconds(1));
    ASSERT_TRUE(r.ok()) << r.status();
    ids.push_back(r->id);
  }
  auto refused = limiter.ReserveAt(kT0, "k", gcra, 1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(MessageOf(refused.status()), HasSubstr("max_reservations"));
  // The refused reservation charged nothing: 97 left.
  EXPECT_EQ(limiter.CheckAt(kT0, "k", gcra, 0)->remaining, 97);
  // A settle makes room at once; expiry makes room once the hold is over.
  ASSERT_TRUE(limiter.SettleAt(kT0, ids[0], 1).ok());
  EXPECT_TRUE(limiter.ReserveAt(kT0, "k", gcra, 1).ok());
  EXPECT_EQ(limiter.ReserveAt(kT0, "k", gcra, 1).status().code(),
            absl::StatusCode::kResourceExhausted);
  const TimePoint later = kT0 + std::chrono::seconds(1);
  EXPECT_TRUE(limiter.ReserveAt(later, "k", gcra, 1).ok());
  EXPECT_EQ(limiter.store().Stats().reservations, 2u);  // the expired two were reclaimed
  EXPECT_EQ(limiter.SettleAt(later, ids[1], 1).status().code(), absl::StatusCode::kNotFound);
}

TEST(Reservations, IdsAreUniqueAndFindTheirKeysInEveryShard) {
  Limiter limiter(std::make_unique<MemoryStore>());
  const Policy gcra = *Policy::Parse("gcra:10/1s");
  std::set<std::string> ids;
  std::vector<std::pair<std::string, std::string>> held;  // key, id
  for (int i = 0; i < 2000; ++i) {
    const std::string key = "user:" + std::to_string(i);
    auto r = limiter.ReserveAt(kT0, key, gcra, 5);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(ids.insert(r->id).second) << "id made twice: " << r->id;
    held.emplace_back(key, r->id);
  }
  EXPECT_EQ(limiter.store().Stats().reservations, 2000u);
  for (const auto& [key, id] : held) {
    auto d = limiter.SettleAt(kT0, id, 1);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->remaining, 9) << key;  // the refund reached this key, and only it
  }
  EXPECT_EQ(limiter.store().Stats().reservations, 0u);
}

// 4 threads reserve an estimate of 3 and settle each at an actual of 0..5 on one key at
// one instant. Refunds come back in full (the spans are all ahead of now) and overcharges
// are charged in full, so once every reservation is settled the key has spent exactly
// the sum of the actuals: any lost update between a reserve and a settle shows.
TEST(Reservations, ManyThreadsSpendExactlyTheSumOfActuals) {
  Limiter limiter(std::make_unique<MemoryStore>());
  const Policy gcra = *Policy::Parse("gcra:1000/1h");  // E = 3.6 s: no refill at one instant
  std::atomic<std::int64_t> actual_sum{0}, reserved{0};
  std::barrier start(4);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 random(t);
        start.arrive_and_wait();
        for (int i = 0; i < 2000; ++i) {
          auto r = limiter.ReserveAt(kT0, "shared", gcra, 3);
          ASSERT_TRUE(r.ok()) << r.status();
          if (!r->decision.allowed) continue;
          ++reserved;
          const std::int64_t actual = std::uniform_int_distribution<int>(0, 5)(random);
          ASSERT_TRUE(limiter.SettleAt(kT0, r->id, actual).ok());
          actual_sum += actual;
        }
      });
    }
  }
  EXPECT_GT(reserved.load(), 300);  // the key was driven to empty, many times over
  const std::int64_t spent = std::min<std::int64_t>(actual_sum.load(), 1000);
  auto peek = limiter.CheckAt(kT0, "shared", gcra, 0);
  ASSERT_TRUE(peek.ok());
  // Overcharges may take the key below empty; the peek then shows 0.
  EXPECT_EQ(peek->remaining, 1000 - spent) << "sum of actuals " << actual_sum.load();
  // Below empty, the wait is exactly the overcharge past the burst.
  if (actual_sum.load() > 1000) {
    EXPECT_EQ(peek->reset_after, microseconds(actual_sum.load() * 3'600'000));
  }
}

}  // namespace
}  // namespace floodgate

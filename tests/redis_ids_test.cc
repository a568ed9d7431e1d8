// Reservation and lease ids without a server: made, parsed back, and forged ones refused.
#include <floodgate/policy.h>
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "store/redis/cluster.h"
#include "store/redis/ids.h"

namespace floodgate::redis {
namespace {

TEST(RedisIds, ReservationIdRoundTrips) {
  for (int slot : {0, 1, 4242, kClusterSlots - 1}) {
    for (std::uint64_t random : {std::uint64_t{0}, std::uint64_t{0xdeadbeef}, ~std::uint64_t{0}}) {
      const std::string id = ReservationId(slot, random);
      EXPECT_EQ(id.size(), 20u);
      auto parsed = ParseSettleId(id);
      ASSERT_TRUE(parsed.ok()) << id << ": " << parsed.status();
      const auto* record = std::get_if<ReservationRef>(&*parsed);
      ASSERT_NE(record, nullptr) << id;
      EXPECT_EQ(record->slot, slot);
      EXPECT_EQ(record->random, random);
    }
  }
}

TEST(RedisIds, RecordKeyLivesOnTheLimitKeysSlot) {
  for (int slot : {0, 7, 12182, kClusterSlots - 1}) {
    const std::string key = RecordKey("fg:", slot, 0x0123456789abcdef);
    EXPECT_TRUE(key.starts_with("fg:res:{")) << key;
    EXPECT_TRUE(key.ends_with("}:0123456789abcdef")) << key;
    EXPECT_EQ(SlotOf(key), slot) << key;
  }
}

TEST(RedisIds, LeaseIdRoundTrips) {
  Policy policy;
  policy.algorithm = Algorithm::kConcurrency;
  policy.limit = 3;
  policy.period = std::chrono::seconds(30);
  const std::string random = LeaseRandom(0xabc);
  EXPECT_EQ(random, "0000000000000abc");
  // Keys are binary: dots, NULs and bytes base64 would pad are all carried.
  for (const std::string& key : {std::string("user:1"), std::string("a.b.c"),
                                 std::string("x\0y", 3), std::string(kMaxKeyBytes, '\xff')}) {
    const std::string id = LeaseId(key, random, policy, 1'700'000'000'000'000);
    auto parsed = ParseSettleId(id);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    const auto* lease = std::get_if<LeaseRef>(&*parsed);
    ASSERT_NE(lease, nullptr);
    EXPECT_EQ(lease->key, key);
    EXPECT_EQ(lease->member, "0000000000000abc.30000000.3.1700000000000000");
  }
}

TEST(RedisIds, ForgedReservationIdsAreNotFound) {
  for (const std::string& id : {
           std::string(),
           std::string("0000"),
           std::string("0000000000000000000"),          // 19 digits
           std::string("000000000000000000000"),        // 21
           std::string("4000") + std::string(16, '0'),  // slot 16384: no such slot
           std::string("ffff") + std::string(16, '0'),
           std::string("zzzz") + std::string(16, '0'),
           std::string("0001") + std::string(15, '0') + "g",
           std::string("-001") + std::string(16, '0'),
           std::string("0001+") + std::string(15, '0'),
           std::string("0001 ") + std::string(15, '0'),
           // ReservationId writes lowercase: one id, one spelling (memory:// reads so too).
           std::string("00AB") + std::string(16, '0'),
           std::string("0000") + "0123456789ABCDEF",
           std::string("0000") + "0123456789aBcdef",
       }) {
    auto parsed = ParseSettleId(id);
    ASSERT_FALSE(parsed.ok()) << '"' << id << '"';
    EXPECT_TRUE(absl::IsNotFound(parsed.status())) << parsed.status();
    EXPECT_EQ(parsed.status().message(), "unknown reservation: not an id this store made");
  }
}

TEST(RedisIds, ForgedLeaseIdsAreNotFound) {
  for (const std::string& id : {
           std::string(".0000000000000abc.1.1.1"),  // no key
           std::string("dXNlcjox."),                // no member
           std::string("!!!.0000000000000abc.1.1.1"),
           // A key one byte longer than any key a request may name.
           std::string(684, 'A') + ".0000000000000abc.1.1.1",
       }) {
    auto parsed = ParseSettleId(id);
    ASSERT_FALSE(parsed.ok()) << '"' << id << '"';
    EXPECT_TRUE(absl::IsNotFound(parsed.status())) << parsed.status();
    EXPECT_EQ(parsed.status().message(), "unknown lease: not an id this store made");
  }
}

}  // namespace
}  // namespace floodgate::redis

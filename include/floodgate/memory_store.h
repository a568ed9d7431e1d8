#pragma once

// The in-process store (memory://): its options, parsed from its URL, and the store.

#include <floodgate/store.h>

#include <cstddef>
#include <functional>
#include <memory>

namespace floodgate {

struct MemoryStoreOptions {
  // Upper bound on keys held, blocks (Policy::block) included. Past it the store
  // reclaims expired keys first, then evicts the least recently used (approximated by
  // the CLOCK algorithm, per shard), and counts evictions.
  std::size_t max_keys = 1'000'000;
  // Upper bound on the bytes the keys hold: 48 per key (its entry and index slot), its
  // bytes past 13, and a sliding log's runs (16 bytes each, up to 2 MiB for 100,000).
  // Past it the store evicts as past max_keys. Shared by the shards, each given at least
  // 4 MiB (fewer shards below 4 MiB each; the default leaves room for 256). Reservations
  // are bounded by count (max_reservations) instead.
  std::size_t max_bytes = std::size_t{1} << 30;
  // Upper bound on reservations and leases held in the whole store (Store::Reserve,
  // Take, Acquire); a key holds at most 100,000. Past either, expired ones are
  // reclaimed, and a new reservation is refused (ResourceExhausted) while every one held
  // is still live: a reservation is never dropped before its hold ends.
  std::size_t max_reservations = 1'000'000;
  // Power of two; 0 picks one from the core count (several shards per core).
  std::size_t shards = 0;
  // Decision time for requests without an explicit `now`; the system clock when empty.
  std::function<TimePoint()> clock;

  // memory://[?max_keys=N&max_bytes=N&max_reservations=N&shards=N]
  static absl::StatusOr<MemoryStoreOptions> FromUrl(std::string_view url);
};

// The embedded store: sharded, each shard an open-addressing index behind its own lock.
// Every key expires once its state is fresh again. All methods are thread-safe.
class MemoryStore final : public Store {
 public:
  explicit MemoryStore(MemoryStoreOptions options = {});
  ~MemoryStore() override;

  StoreStats Stats() const override;
  std::string Describe() const override;
  // Every decision is made on the caller's thread.
  bool AnswersInline() const override { return true; }

  // Reclaims up to `budget_per_shard` expired keys in each shard (looking at a bounded
  // number of keys), one shard locked at a time. Inserts reclaim as they go; this lets
  // an idle store give memory back too. Returns the number of keys reclaimed.
  std::size_t ReclaimExpired(std::size_t budget_per_shard);
  // The bytes the keys hold, as max_bytes counts them. Locks one shard at a time.
  std::size_t bytes() const;

  std::size_t shard_count() const;

 protected:
  absl::StatusOr<Decision> DecideValidated(const DecideRequest& request) override;
  absl::StatusOr<Decision> DecidePreparedValidated(std::string_view key, const Policy& policy,
                                                   std::int64_t cost,
                                                   std::optional<TimePoint> now) override;
  absl::StatusOr<MultiDecision> DecideAllValidated(const MultiRequest& request) override;
  bool HoldsInOneStep() const override { return true; }
  absl::StatusOr<Reservation> ReserveValidated(const ReserveRequest& request) override;
  absl::StatusOr<Reservation> TakeValidated(const TakeRequest& request) override;
  absl::StatusOr<Decision> SettleValidated(const SettleRequest& request) override;
  absl::StatusOr<CountAnswer> CountValidated(const CountRequest& request) override;
  absl::StatusOr<Decision> OperateValidated(const OperateRequest& request) override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace floodgate

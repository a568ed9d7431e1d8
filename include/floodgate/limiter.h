#pragma once

// Limiter: what applications call with a key, a policy and a cost.

#include <floodgate/store.h>

#include <chrono>
#include <future>
#include <memory>
#include <string_view>

namespace floodgate {

class DelayQueue;  // src/delay_queue.h: WaitAsync's timer

// What applications call: a key, a policy, a cost, and a Decision back.
// Thread-safe; movable, not copyable.
class Limiter {
 public:
  // Opens the store named by `store_url` ("memory://" when empty).
  static absl::StatusOr<Limiter> Open(std::string_view store_url = "memory://");
  explicit Limiter(std::unique_ptr<Store> store);
  ~Limiter();
  Limiter(Limiter&&) noexcept;
  Limiter& operator=(Limiter&&) noexcept;

  // Decides at the store's clock.
  absl::StatusOr<Decision> Check(std::string_view key, const Policy& policy, std::int64_t cost = 1);
  // Decides at an explicit time (replays, tests).
  absl::StatusOr<Decision> CheckAt(TimePoint now, std::string_view key, const Policy& policy,
                                   std::int64_t cost = 1);

  // The same under a PreparedPolicy, whose checks ran once: the fastest way to decide many
  // times under one policy (docs/embedding.md, "Prepared policies").
  absl::StatusOr<Decision> Check(std::string_view key, const PreparedPolicy& policy,
                                 std::int64_t cost = 1);
  absl::StatusOr<Decision> CheckAt(TimePoint now, std::string_view key,
                                   const PreparedPolicy& policy, std::int64_t cost = 1);

  // Decides at the store's clock and answers through `done`, possibly on the store's
  // I/O thread (see Store::DecideAsync). The key is copied.
  void CheckAsync(std::string_view key, const Policy& policy, std::int64_t cost,
                  DecisionCallback done);

  // Several limits at once, all or nothing (docs/multi.md): allowed iff every enforced
  // item allows; then every item consumes, else none does. At the store's clock, at an
  // explicit time, or answered through `done` (possibly on the store's I/O thread).
  absl::StatusOr<MultiDecision> CheckAll(std::span<const CheckItem> items);
  absl::StatusOr<MultiDecision> CheckAllAt(TimePoint now, std::span<const CheckItem> items);
  void CheckAllAsync(std::span<const CheckItem> items, MultiCallback done);

  // A cost known only afterwards (docs/reservations.md): Reserve decides at cost =
  // estimate and, when allowed, holds a reservation for `hold`; Settle charges its actual
  // cost instead (a refund below the estimate, a further charge above it), once. An
  // unsettled reservation expires charged at the estimate.
  absl::StatusOr<Reservation> Reserve(std::string_view key, const Policy& policy,
                                      std::int64_t estimate,
                                      std::chrono::microseconds hold = kDefaultHold);
  absl::StatusOr<Reservation> ReserveAt(TimePoint now, std::string_view key, const Policy& policy,
                                        std::int64_t estimate,
                                        std::chrono::microseconds hold = kDefaultHold);
  absl::StatusOr<Decision> Settle(std::string_view id, std::int64_t actual);
  absl::StatusOr<Decision> SettleAt(TimePoint now, std::string_view id, std::int64_t actual);

  // An in-flight limit (docs/leases.md), under `concurrency:N[,lease=T]`: Acquire holds one
  // of N leases until Release(id) or, at the latest, for T; a denial's retry_after is the
  // earliest lease expiry.
  absl::StatusOr<Lease> Acquire(std::string_view key, const Policy& policy);
  absl::StatusOr<Lease> AcquireAt(TimePoint now, std::string_view key, const Policy& policy);
  absl::StatusOr<Decision> Release(std::string_view id);
  absl::StatusOr<Decision> ReleaseAt(TimePoint now, std::string_view id);

  // Operating a key (docs/algorithms.md, "Operating a key"), each atomic like a decision and
  // answering the key's peek right after it: Reset forgets the key's state under `policy`
  // (its block too), Refund gives back up to `units` (never lifting a block), Penalize
  // charges `units` even past the limit. Any algorithm but concurrency (a lease is given
  // back with Release). At the store's clock, or at an explicit time.
  absl::StatusOr<Decision> Reset(std::string_view key, const Policy& policy);
  absl::StatusOr<Decision> Refund(std::string_view key, const Policy& policy, std::int64_t units);
  absl::StatusOr<Decision> Penalize(std::string_view key, const Policy& policy, std::int64_t units);
  absl::StatusOr<Decision> OperateAt(TimePoint now, std::string_view key, const Policy& policy,
                                     KeyOperation op, std::int64_t units = 0);

  // Waiting for a slot (docs/embedding.md, "Waiting"; docs/algorithms.md "Waiting"): asks
  // the store once, at its clock, and returns when the request may proceed. The wait allowed
  // is the policy's delay= capped by `deadline` (without delay=, the deadline alone, at most
  // kMaxDelay); a slot further than that is denied at once, nothing charged, with
  // retry_after. gcra, token_bucket and sliding_log only. Thread-safe.
  // Sync: sleeps the calling thread for the answer's delay, then returns it.
  absl::StatusOr<Decision> Wait(std::string_view key, const Policy& policy,
                                std::chrono::steady_clock::time_point deadline,
                                std::int64_t cost = 1);
  // Async: `done` runs once the delay has passed (or at once when denied or not delayed),
  // on the limiter's one timer thread or the store's I/O thread; no thread waits per
  // request. A limiter destroyed first answers its waiters with Cancelled (their charges
  // stay). The key is copied.
  void WaitAsync(std::string_view key, const Policy& policy,
                 std::chrono::steady_clock::time_point deadline, std::int64_t cost,
                 DecisionCallback done);
  std::future<absl::StatusOr<Decision>> WaitFuture(std::string_view key, const Policy& policy,
                                                   std::chrono::steady_clock::time_point deadline,
                                                   std::int64_t cost = 1);
  // Several limits waiting for their common start (docs/algorithms.md, "Waiting",
  // multi-decisions): CheckAll's items, each enforced item with a cost capped by `deadline`
  // as Wait caps one (so each of them must be gcra, token_bucket or sliding_log); the
  // request waits MultiDecision::delay, the latest of their starts, when that is within the
  // least of their waits; else it is denied at once, nothing charged. No item may hold (a
  // lease, a reservation). Thread-safe; the async form as WaitAsync's (the items are copied).
  absl::StatusOr<MultiDecision> WaitAll(std::span<const CheckItem> items,
                                        std::chrono::steady_clock::time_point deadline);
  void WaitAllAsync(std::span<const CheckItem> items,
                    std::chrono::steady_clock::time_point deadline, MultiCallback done);

  Store& store() { return *store_; }

 private:
  // Declared before the store, so destroyed after it: an answer the store gives while it
  // closes may still queue its delay.
  std::unique_ptr<DelayQueue> timers_;
  std::unique_ptr<Store> store_;
};

}  // namespace floodgate

#pragma once

// Budgets: units of a shared limit leased per key and spent in process (prefetch_client.md).

#include <absl/container/flat_hash_map.h>
#include <floodgate/store.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/prefetch/sizing.h"

namespace floodgate::prefetch {

// What the budgets ask of the store they lease from. Each call answers through its
// callback exactly once, on any thread, possibly before it returns.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual void Take(const TakeRequest& request, ReservationCallback done) = 0;
  virtual void Settle(const SettleRequest& request, DecisionCallback done) = 0;
  // A decision without a budget: the shared state decides the request itself.
  virtual void Decide(const DecideRequest& request, DecisionCallback done) = 0;
};

// A Backend over any Store's public calls; `decide` answers the per-request decisions
// (by default the store's DecideAsync, under the policy without prefetch).
class StoreBackend final : public Backend {
 public:
  using DecideFn = absl::AnyInvocable<void(const DecideRequest&, DecisionCallback)>;
  explicit StoreBackend(Store& store, DecideFn decide = nullptr)
      : store_(store), decide_(std::move(decide)) {}

  void Take(const TakeRequest& request, ReservationCallback done) override {
    store_.TakeAsync(request, std::move(done));
  }
  void Settle(const SettleRequest& request, DecisionCallback done) override {
    store_.SettleAsync(request, std::move(done));
  }
  void Decide(const DecideRequest& request, DecisionCallback done) override {
    if (decide_) return decide_(request, std::move(done));
    store_.DecideAsync(request, std::move(done));
  }

 private:
  Store& store_;
  DecideFn decide_;
};

// A moment on both clocks: budgets end on the steady one, a store answers `expires` on
// the system one.
struct Moment {
  Steady::time_point steady;
  TimePoint system;
  static Moment Now() { return Moment{Steady::now(), SystemNow()}; }
};

struct BudgetOptions {
  // Budgets held at once per store; past it, new keys are decided per request.
  std::size_t max_budgets = 10'000;
  // A denied take is remembered (requests denied in process) until its retry_after when
  // that is at least this long, as the Redis store's denial cache does; 0: never.
  std::chrono::microseconds remember_denials = std::chrono::milliseconds(10);
  // How often budgets past their end are returned and idle ones dropped; 0: only by Sweep().
  std::chrono::microseconds sweep_every = std::chrono::milliseconds(5);
  // The time of a take sent from a take's answer (Decide and Sweep are given theirs).
  std::function<Moment()> clock = Moment::Now;
};

// Counters for metrics (docs/prefetch_client.md, "Metrics").
struct PrefetchStats {
  std::uint64_t leases = 0;           // takes that leased units
  std::uint64_t units_leased = 0;     // units those takes charged
  std::uint64_t units_returned = 0;   // unused units settled back
  std::uint64_t return_failures = 0;  // returns whose settle failed (the units stay spent)
  std::uint64_t local_decisions = 0;  // answered from a budget, no store call
  std::uint64_t per_request = 0;      // prefetch decisions the shared state decided itself
  std::uint64_t denied_takes = 0;     // takes answered "nothing left"
  std::uint64_t budgets = 0;          // (key, policy) entries held now
};

// The budget table. Thread-safe; answers may come on the backend's threads.
class Budgets {
 public:
  Budgets(std::unique_ptr<Backend> backend, BudgetOptions options);
  ~Budgets();
  Budgets(const Budgets&) = delete;
  Budgets& operator=(const Budgets&) = delete;

  // Decides a valid request whose policy has prefetch: from its key's budget while that
  // lasts, else after the one take in flight for it, else per request (a peek, a request
  // with its own `now`, a cold key under auto, a cost the budget cannot hold).
  void Decide(const DecideRequest& request, DecisionCallback done, Moment now = Moment::Now());

  // Returns the unused units of every budget past its end and drops idle entries (the
  // sweeper thread calls it every sweep_every).
  void Sweep(Moment now = Moment::Now());

  // Returns every budget's unused units, waits (bounded) for those settles, stops the
  // sweeper; later requests are decided per request. Idempotent.
  void Close();

  PrefetchStats stats() const;

 private:
  struct Budget;
  struct Shard;
  struct Return;
  struct Admission;
  enum class Route : std::uint8_t;
  static constexpr std::size_t kShards = 16;

  // Under the shard's lock: what to do with `request` (Admission says).
  void Admit(Shard& shard, std::size_t hash, const DecideRequest& request, Moment now,
             DecisionCallback& done, Admission& out);
  void StartTake(const std::shared_ptr<Budget>& budget, std::int64_t units, Moment sent);
  void OnTaken(const std::shared_ptr<Budget>& budget, Moment sent,
               absl::StatusOr<Reservation> taken);
  // Under the shard's lock: ends the lease held, noting its unused units to return.
  void EndLease(Budget& budget, std::vector<Return>& returns);
  void SendReturns(std::vector<Return>& returns);
  void PerRequest(const DecideRequest& request, DecisionCallback done);
  void StartSweeper();

  std::unique_ptr<Backend> backend_;
  const BudgetOptions options_;
  std::array<std::unique_ptr<Shard>, kShards> shards_;
  std::atomic<std::size_t> budget_count_{0};
  std::atomic<bool> closed_{false};

  // Counters (relaxed: read only for metrics).
  std::atomic<std::uint64_t> leases_{0};
  std::atomic<std::uint64_t> units_leased_{0};
  std::atomic<std::uint64_t> units_returned_{0};
  std::atomic<std::uint64_t> return_failures_{0};
  std::atomic<std::uint64_t> local_decisions_{0};
  std::atomic<std::uint64_t> per_request_{0};
  std::atomic<std::uint64_t> denied_takes_{0};

  // Settles in flight, so Close can wait for its returns to land.
  std::mutex returns_mu_;
  std::condition_variable returns_cv_;
  std::size_t returns_in_flight_ = 0;

  std::once_flag sweeper_once_;
  std::mutex sweeper_mu_;
  std::condition_variable_any sweeper_cv_;
  std::jthread sweeper_;
};

}  // namespace floodgate::prefetch

#pragma once

// The memory store's count of reservations and leases held, against max_reservations, store-wide.

#include <atomic>
#include <cstddef>

namespace floodgate::memory {

// One count for every shard, so that max_reservations bounds the store, not each shard's
// share of it: one key may hold what its limit allows (docs/leases.md: up to 100,000
// leases) however many shards there are. A shard claims a hold before it decides and
// returns the claim when it holds nothing after all, so the bound is exact across
// threads. Its own cache line: every reserve and settle writes it.
class alignas(64) HoldBudget {
 public:
  explicit HoldBudget(std::size_t max) : max_(max) {}
  HoldBudget(const HoldBudget&) = delete;
  HoldBudget& operator=(const HoldBudget&) = delete;

  // Thread-safe. Claims one hold; false when the store holds max() already.
  bool TryClaim() {
    std::size_t held = held_.load(std::memory_order_relaxed);
    do {
      if (held >= max_) return false;
    } while (!held_.compare_exchange_weak(held, held + 1, std::memory_order_relaxed));
    return true;
  }
  // Thread-safe. A claim not used, or a hold that ended (settled, released, expired).
  void Return() { held_.fetch_sub(1, std::memory_order_relaxed); }
  // Thread-safe; a hint (another thread may claim or return right after).
  bool full() const { return held_.load(std::memory_order_relaxed) >= max_; }
  std::size_t max() const { return max_; }

 private:
  std::atomic<std::size_t> held_{0};
  const std::size_t max_;
};

}  // namespace floodgate::memory

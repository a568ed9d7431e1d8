#pragma once

// A circuit breaker for a Redis node: fail fast while Redis is down, one probe to close.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace floodgate::redis {

// A circuit breaker: after `threshold` consecutive failures, Allow() says no for
// `open_for`, so callers answer at memory speed instead of each waiting out a timeout on a
// dead Redis; then one probe goes through, and its success closes the breaker.
// Thread-safe, lock-free.
class Breaker {
 public:
  using Clock = std::chrono::steady_clock;

  Breaker(int threshold, std::chrono::microseconds open_for)
      : threshold_(threshold), open_for_(open_for) {}

  bool Allow(Clock::time_point now) {
    const std::int64_t until = open_until_.load(std::memory_order_acquire);
    if (until == 0) return true;
    const std::int64_t at = Ticks(now);
    if (at < until) return false;
    // Half-open: exactly one probe. A probe whose outcome never came back (it was
    // redirected elsewhere, or answered without reaching this server) is replaced after
    // another open period, so the breaker cannot stay half-open for good.
    std::int64_t started = probe_started_.load(std::memory_order_relaxed);
    if (started != 0 && at - started < open_for_ticks()) return false;
    return probe_started_.compare_exchange_strong(started, at);
  }
  void Success() {
    failures_.store(0, std::memory_order_relaxed);
    if (open_until_.load(std::memory_order_relaxed) != 0) {
      open_until_.store(0, std::memory_order_release);
      probe_started_.store(0, std::memory_order_relaxed);
    }
  }
  void Failure(Clock::time_point now) {
    const int failures = failures_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (failures >= threshold_ || open_until_.load(std::memory_order_relaxed) != 0) {
      open_until_.store(Ticks(now + open_for_), std::memory_order_release);
      probe_started_.store(0, std::memory_order_relaxed);
    }
  }
  bool open(Clock::time_point now) const {
    const std::int64_t until = open_until_.load(std::memory_order_acquire);
    return until != 0 && Ticks(now) < until;
  }

 private:
  static std::int64_t Ticks(Clock::time_point t) {
    return std::max<std::int64_t>(1, t.time_since_epoch().count());
  }
  std::int64_t open_for_ticks() const {
    return std::chrono::duration_cast<Clock::duration>(open_for_).count();
  }

  const int threshold_;
  const std::chrono::microseconds open_for_;
  std::atomic<int> failures_{0};
  std::atomic<std::int64_t> open_until_{0};     // 0: closed
  std::atomic<std::int64_t> probe_started_{0};  // 0: no probe out
};

}  // namespace floodgate::redis

#pragma once

// Decisions under a failover, each answer recorded: what the failover tests count (issue 37).

#include <floodgate/store.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hang_guard.h"

namespace floodgate::testing {

// One answer under load: when it came, whether Redis gave it, and what it counted.
struct LoadAnswer {
  std::chrono::steady_clock::time_point at;
  bool degraded = false;
  bool allowed = false;
  std::int64_t counted = 0;  // the key's count when Redis answered (limit - remaining)
};

// Decides on one key from a thread, recording every answer, until stopped (bounded in
// count and time, far beyond what a test waits for).
class FailoverLoad {
 public:
  using Steady = std::chrono::steady_clock;

  FailoverLoad(Store& store, Policy policy, std::string key = "hot")
      : store_(store), policy_(std::move(policy)), key_(std::move(key)) {
    thread_ = std::jthread([this] {
      const auto deadline = Steady::now() + 4 * kHangGuard;
      for (int i = 0; i < 10'000'000 && !stop_ && Steady::now() < deadline; ++i) {
        auto d = store_.Decide({key_, policy_, 1, std::nullopt});
        if (!d.ok()) {
          ADD_FAILURE() << d.status();
          return;
        }
        std::lock_guard lock(mu_);
        answers_.push_back({Steady::now(), d->degraded, d->allowed, policy_.limit - d->remaining});
      }
    });
  }
  // A test that fails half way stops the load too (jthread's stop token is not asked).
  ~FailoverLoad() { stop_ = true; }
  std::vector<LoadAnswer> Stop() {
    stop_ = true;
    thread_.join();
    std::lock_guard lock(mu_);
    return answers_;
  }
  // Waits (bounded) until an answer after `after` satisfies `wanted`; its time, or nullopt.
  std::optional<Steady::time_point> WaitFor(Steady::time_point after,
                                            const std::function<bool(const LoadAnswer&)>& wanted,
                                            std::chrono::milliseconds limit) {
    const auto deadline = Steady::now() + limit;
    while (Steady::now() < deadline) {
      {
        std::lock_guard lock(mu_);
        for (auto it = answers_.rbegin(); it != answers_.rend() && it->at > after; ++it) {
          if (wanted(*it)) return it->at;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return std::nullopt;
  }

 private:
  Store& store_;
  const Policy policy_;
  const std::string key_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<LoadAnswer> answers_;
  std::jthread thread_;
};

// The decisions Redis acknowledged (admitted, not degraded) among `answers`. Those the
// primary does not hold after a failover were lost: the new primary hands them out again.
inline std::int64_t Acknowledged(const std::vector<LoadAnswer>& answers) {
  std::int64_t acknowledged = 0;
  for (const LoadAnswer& a : answers) acknowledged += a.allowed && !a.degraded ? 1 : 0;
  return acknowledged;
}

}  // namespace floodgate::testing

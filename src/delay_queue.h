#pragma once

// DelayQueue: callbacks run when their time comes, all on one timer thread (Limiter::WaitAsync).

#include <absl/functional/any_invocable.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

namespace floodgate {

// One thread sleeps until the earliest due callback, so a waiter costs a queue entry, never a
// parked thread of its own. Started with the first callback. Thread-safe.
class DelayQueue {
 public:
  using Callback = absl::AnyInvocable<void(bool on_time)>;

  DelayQueue() = default;
  DelayQueue(const DelayQueue&) = delete;
  DelayQueue& operator=(const DelayQueue&) = delete;
  // Runs every callback still queued with on_time false, then joins the thread.
  ~DelayQueue();

  // Runs `done(true)` on the timer thread at `due` (at once when that has passed).
  void At(std::chrono::steady_clock::time_point due, Callback done);

  std::size_t size() const;

 private:
  struct Entry {
    std::chrono::steady_clock::time_point due;
    std::uint64_t order;  // ties in the order queued
    mutable Callback done;
    bool operator>(const Entry& other) const {
      return due != other.due ? due > other.due : order > other.order;
    }
  };

  void Run();

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
  std::uint64_t next_order_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace floodgate

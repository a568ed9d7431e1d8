// DelayQueue: a min-heap of due callbacks and the one thread that runs them.

#include "delay_queue.h"

#include <utility>

namespace floodgate {

DelayQueue::~DelayQueue() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Whatever was still waiting hears that the queue closed early (each callback once).
  while (!queue_.empty()) {
    Callback done = std::move(queue_.top().done);
    queue_.pop();
    done(false);
  }
}

void DelayQueue::At(std::chrono::steady_clock::time_point due, Callback done) {
  bool queued = false;
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      queue_.push(Entry{due, next_order_++, std::move(done)});
      if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
      queued = true;
    }
  }
  if (!queued) return done(false);  // closing: never queued
  wake_.notify_one();
}

std::size_t DelayQueue::size() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

void DelayQueue::Run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (queue_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const auto due = queue_.top().due;
    if (std::chrono::steady_clock::now() < due) {
      wake_.wait_until(lock, due);  // a new, earlier entry or stopping wakes it too
      continue;
    }
    Callback done = std::move(queue_.top().done);
    queue_.pop();
    lock.unlock();
    done(true);  // unlocked: a callback may queue another
    lock.lock();
  }
}

}  // namespace floodgate

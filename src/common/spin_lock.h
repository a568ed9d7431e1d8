#pragma once

// SpinLock: the lock of a memory shard, whose critical section is one key's decision.

#include <atomic>
#include <thread>

namespace floodgate {

// A lock for critical sections of a few dozen nanoseconds (one key's decision in a memory
// shard): one atomic exchange to take it and a plain release store to give it back. A
// mutex's unlock is a second atomic read-modify-write (to see whether anyone sleeps),
// which measured as a large share of an in-memory decision. While taken it spins on a
// read (PAUSE between reads, so the holder's core is not starved of the cache line), and
// after a while yields, so that a holder preempted mid-section gets a core back: threads
// outnumbering cores degrade to yielding, never to spinning a whole time slice.
// Meets Lockable (std::lock_guard, std::scoped_lock).
class SpinLock {
 public:
  void lock() {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (spins < kSpinsBeforeYield) {
          Pause();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  bool try_lock() { return !locked_.exchange(true, std::memory_order_acquire); }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  // About a microsecond of spinning: longer than any critical section it guards.
  static constexpr int kSpinsBeforeYield = 128;

  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  std::atomic<bool> locked_{false};
};

}  // namespace floodgate

#pragma once

// The sliding log's state: a ring buffer of runs of units, bounded by the policy's limit.

#include <cstddef>
#include <cstdint>
#include <memory>

namespace floodgate::core {

// The entries of a sliding log, oldest first, as runs of units admitted at the same µs.
// A ring buffer: at most one run per admitted unit, and a log never holds more than L
// units, so memory per key is bounded by the policy (and usually far smaller: a burst
// admitted at one instant is one run).
class SlidingLog {
 public:
  struct Run {
    std::int64_t time;
    std::int64_t count;
  };

  SlidingLog() = default;
  SlidingLog(SlidingLog&&) noexcept = default;
  SlidingLog& operator=(SlidingLog&&) noexcept = default;

  bool empty() const { return size_ == 0; }
  std::size_t runs() const { return size_; }
  std::int64_t units() const { return units_; }
  const Run& oldest() const { return at(0); }
  const Run& newest() const { return at(size_ - 1); }
  const Run& at(std::size_t i) const { return buffer_[(head_ + i) & (capacity_ - 1)]; }

  // Drops every run with time <= cutoff.
  void DropThrough(std::int64_t cutoff);
  // Merges every run with time <= cutoff into one run at `time` (cutoff < time <= the time of
  // the first run after them), keeping their units.
  void MergeThrough(std::int64_t cutoff, std::int64_t time);
  // Appends `count` units at `time` (>= newest().time).
  void Append(std::int64_t time, std::int64_t count);
  // Adds `delta` units (negative: removes, at most the run's count) to the run at
  // `time`, dropping it when it empties. False when there is no run at `time`.
  bool AddToRun(std::int64_t time, std::int64_t delta);
  // Time of the k-th oldest unit, 1 <= k <= units().
  std::int64_t TimeOfUnit(std::int64_t k) const;
  // Bytes held on the heap.
  std::size_t heap_bytes() const { return capacity_ * sizeof(Run); }

 private:
  void Resize(std::size_t capacity);

  std::unique_ptr<Run[]> buffer_;
  std::size_t capacity_ = 0;  // power of two, or 0
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  std::int64_t units_ = 0;
};

}  // namespace floodgate::core

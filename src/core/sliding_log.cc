#include "core/sliding_log.h"

#include <algorithm>
#include <cassert>

namespace floodgate::core {

namespace {
constexpr std::size_t kMinCapacity = 2;
}

void SlidingLog::DropThrough(std::int64_t cutoff) {
  while (size_ > 0 && oldest().time <= cutoff) {
    units_ -= oldest().count;
    head_ = (head_ + 1) & (capacity_ - 1);
    --size_;
  }
  if (size_ == 0) {
    buffer_.reset();
    capacity_ = head_ = 0;
  } else if (capacity_ > kMinCapacity && size_ * 4 <= capacity_) {
    Resize(capacity_ / 2);
  }
}

void SlidingLog::Append(std::int64_t time, std::int64_t count) {
  assert(count > 0);
  assert(size_ == 0 || time >= newest().time);
  units_ += count;
  if (size_ > 0 && newest().time == time) {
    buffer_[(head_ + size_ - 1) & (capacity_ - 1)].count += count;
    return;
  }
  if (size_ == capacity_) Resize(capacity_ == 0 ? kMinCapacity : capacity_ * 2);
  buffer_[(head_ + size_) & (capacity_ - 1)] = Run{time, count};
  ++size_;
}

std::int64_t SlidingLog::TimeOfUnit(std::int64_t k) const {
  assert(k >= 1 && k <= units_);
  for (std::size_t i = 0; i < size_; ++i) {
    const Run& run = at(i);
    if (k <= run.count) return run.time;
    k -= run.count;
  }
  return newest().time;  // unreachable for a valid k
}

void SlidingLog::Resize(std::size_t capacity) {
  auto buffer = std::make_unique_for_overwrite<Run[]>(capacity);
  for (std::size_t i = 0; i < size_; ++i) buffer[i] = at(i);
  buffer_ = std::move(buffer);
  capacity_ = capacity;
  head_ = 0;
}

}  // namespace floodgate::core

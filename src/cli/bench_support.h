#pragma once

// Pieces shared by `floodgate bench` and the benchmarks in bench/.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace floodgate::cli {

// A log-linear latency histogram in nanoseconds, HDR-style: 64 linear sub-buckets per
// power of two, so every percentile is within 1.6% of the true value at any scale.
// Written here because Debian packages no C/C++ HdrHistogram.
class LatencyHistogram {
 public:
  LatencyHistogram();
  void Record(std::uint64_t ns);
  void Merge(const LatencyHistogram& other);
  // The value at quantile q (0..1), in ns; 0 when empty.
  std::uint64_t Percentile(double q) const;
  std::uint64_t count() const { return count_; }

 private:
  static constexpr unsigned kSubBits = 6;
  static std::size_t Index(std::uint64_t ns);
  static std::uint64_t UpperBound(std::size_t index);
  std::vector<std::uint64_t> buckets_;
  std::uint64_t count_ = 0;
};

// The keys a benchmark thread asks for, drawn up front (uniform, or Zipf with exponent
// s over ranks 1..N) so that drawing costs an array read, the same for every loop
// measured against each other.
class KeySequence {
 public:
  KeySequence(std::size_t keys, double zipf_s, std::uint64_t seed, std::size_t length = 1 << 20);
  std::uint32_t operator[](std::size_t i) const { return draws_[i & (draws_.size() - 1)]; }

 private:
  std::vector<std::uint32_t> draws_;
};

std::vector<std::string> MakeKeys(std::size_t count);

// Runs `body(thread_index, stop)` on `threads` threads, raising `stop` after `duration`
// or returning as soon as every body has returned, whichever comes first. Each body polls
// `stop` and returns the number of operations it did; the total is returned with the
// measured wall time.
struct LoopResult {
  std::uint64_t operations = 0;
  double seconds = 0;
};
LoopResult RunTimed(int threads, std::chrono::nanoseconds duration,
                    const std::function<std::uint64_t(int, const std::atomic<bool>&)>& body);

}  // namespace floodgate::cli

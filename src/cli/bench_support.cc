// Pieces shared by `floodgate bench` and bench/: keys, timed loops, the latency histogram.

#include "cli/bench_support.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

namespace floodgate::cli {

LatencyHistogram::LatencyHistogram() : buckets_((64 - kSubBits + 1) << kSubBits, 0) {}

std::size_t LatencyHistogram::Index(std::uint64_t ns) {
  if (ns < (1u << kSubBits)) return ns;
  const unsigned shift = std::bit_width(ns) - kSubBits - 1;
  return ((shift + 1) << kSubBits) + ((ns >> shift) & ((1u << kSubBits) - 1));
}

std::uint64_t LatencyHistogram::UpperBound(std::size_t index) {
  if (index < (1u << kSubBits)) return index;
  const unsigned shift = (index >> kSubBits) - 1;
  const std::uint64_t base = (std::uint64_t{1} << kSubBits) | (index & ((1u << kSubBits) - 1));
  return ((base + 1) << shift) - 1;
}

void LatencyHistogram::Record(std::uint64_t ns) {
  ++buckets_[Index(ns)];
  ++count_;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (std::size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
}

std::uint64_t LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  const auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_)));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= std::max<std::uint64_t>(rank, 1)) return UpperBound(i);
  }
  return UpperBound(buckets_.size() - 1);
}

KeySequence::KeySequence(std::size_t keys, double zipf_s, std::uint64_t seed, std::size_t length)
    : draws_(std::bit_ceil(length)) {
  std::mt19937_64 rng(seed);
  if (zipf_s <= 0) {
    std::uniform_int_distribution<std::uint32_t> uniform(0, static_cast<std::uint32_t>(keys - 1));
    for (auto& d : draws_) d = uniform(rng);
    return;
  }
  std::vector<double> weights(keys);
  for (std::size_t i = 0; i < keys; ++i) weights[i] = 1.0 / std::pow(double(i + 1), zipf_s);
  std::discrete_distribution<std::uint32_t> zipf(weights.begin(), weights.end());
  // Rank 1 is not key 0: a fixed shuffle spreads the hot keys over shards like real ones.
  std::vector<std::uint32_t> rank_to_key(keys);
  for (std::size_t i = 0; i < keys; ++i) rank_to_key[i] = static_cast<std::uint32_t>(i);
  std::shuffle(rank_to_key.begin(), rank_to_key.end(), rng);
  for (auto& d : draws_) d = rank_to_key[zipf(rng)];
}

std::vector<std::string> MakeKeys(std::size_t count) {
  std::vector<std::string> keys;
  keys.reserve(count);
  for (std::size_t i = 0; i < count; ++i) keys.push_back("user:" + std::to_string(i));
  return keys;
}

LoopResult RunTimed(int threads, std::chrono::nanoseconds duration,
                    const std::function<std::uint64_t(int, const std::atomic<bool>&)>& body) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> total{0};
  std::mutex mu;
  std::condition_variable finished_cv;
  int finished = 0;  // guarded by mu
  std::vector<std::jthread> workers;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      total += body(t, stop);
      std::lock_guard lock(mu);
      ++finished;
      finished_cv.notify_one();
    });
  }
  {
    // The measured interval, or less once every body has returned on its own (a count
    // bound such as bench's --max-decisions): a run bounded by count ends with its work,
    // and its duration is then only a guard.
    std::unique_lock lock(mu);
    finished_cv.wait_for(lock, duration, [&] { return finished == threads; });
  }
  stop = true;
  workers.clear();  // joins
  const auto end = std::chrono::steady_clock::now();
  return {total.load(), std::chrono::duration<double>(end - start).count()};
}

}  // namespace floodgate::cli

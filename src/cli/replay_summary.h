#pragma once

// The counts of a replay, per key up to a bound, and the summary printed at its end.

#include <absl/container/flat_hash_map.h>
#include <floodgate/decision.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace floodgate::cli {

// Counts of a replay, per key up to a bound: a trace may hold tens of millions of keys,
// and the summary must not need more memory than the store it summarises.
class ReplaySummary {
 public:
  static constexpr std::size_t kMaxTrackedKeys = 1'000'000;

  void Add(std::string_view key, const Decision& decision, std::int64_t t);
  // The human summary printed to stderr: totals, denial rate, span, top denied keys.
  std::string Render(std::string_view policy, std::size_t top, double seconds) const;

  std::uint64_t allowed() const { return allowed_; }
  std::uint64_t denied() const { return denied_; }

 private:
  struct KeyCounts {
    std::uint64_t requests = 0;
    std::uint64_t denied = 0;
  };
  absl::flat_hash_map<std::string, KeyCounts> keys_;
  std::uint64_t untracked_requests_ = 0;
  std::uint64_t allowed_ = 0;
  std::uint64_t denied_ = 0;
  std::uint64_t degraded_ = 0;
  // Admissions with a delay (delay=D): how many, and their delays' sum and maximum.
  std::uint64_t delayed_ = 0;
  std::int64_t delay_sum_us_ = 0;
  std::int64_t delay_max_us_ = 0;
  std::int64_t first_t_ = 0;
  std::int64_t last_t_ = 0;
};

}  // namespace floodgate::cli

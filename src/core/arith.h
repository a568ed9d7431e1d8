#pragma once

// Rounding helpers for the double arithmetic of docs/algorithms.md.
//
// Every value passed here is bounded by the policy ranges (see kMaxBurstWindow), far inside int64.

#include <floodgate/decision.h>

#include <chrono>
#include <cmath>
#include <cstdint>

namespace floodgate::core {

inline std::int64_t CeilToInt(double x) { return static_cast<std::int64_t>(std::ceil(x)); }
inline std::int64_t FloorToInt(double x) { return static_cast<std::int64_t>(std::floor(x)); }
inline double D(std::int64_t x) { return static_cast<double>(x); }

// a / b for a >= 0 and b > 0, skipping the divide when a < b: a hot key's answers mostly
// are that (a denial's room is under one emission interval), and a 64-bit divide costs
// tens of cycles, a good part of an in-memory decision.
inline std::int64_t Quotient(std::int64_t a, std::int64_t b) { return a < b ? 0 : a / b; }

// Writes every field of a decision: remaining clamped to >= 0, retry 0 when allowed.
inline void SetDecision(Decision& d, bool allowed, std::int64_t limit, std::int64_t remaining,
                        std::int64_t retry_after_us, std::int64_t reset_after_us) {
  d.allowed = allowed;
  d.limit = limit;
  d.remaining = remaining < 0 ? 0 : remaining;
  d.retry_after = std::chrono::microseconds(allowed ? 0 : retry_after_us);
  d.reset_after = std::chrono::microseconds(reset_after_us);
  d.degraded = false;
  d.blocked = false;
  d.delayable = false;
  d.delay = std::chrono::microseconds(0);
}

// After SetDecision, for a policy with delay= (docs/algorithms.md, "Waiting").
inline void MarkDelayable(Decision& d, std::int64_t delay_us) {
  d.delayable = true;
  d.delay = std::chrono::microseconds(delay_us);
}

}  // namespace floodgate::core

#pragma once

// The five algorithms of algorithms.md as pure functions of (policy, state, now, cost).
// No I/O, no clocks, no locks: stores fetch the state, call one of these, and save what
// they are told to save. lua/ holds the only other definition; tests/vectors proves the
// two agree.
//
// Conventions shared by every function here:
// - Times are integer µs on the Unix epoch; `cost` is 0..kMaxCost; the policy is valid.
// - cost 0 is a peek: always allowed, never asks for a write.
// - `remaining` is clamped to >= 0.
// - Time going backwards is clamped to the newest time the key's state has seen, so
//   waits are never negative and no refill is counted twice.

#include <floodgate/decision.h>
#include <floodgate/policy.h>

#include <cstdint>
#include <optional>

#include "core/sliding_log.h"

namespace floodgate::core {

struct GcraState {
  std::int64_t tat;  // theoretical arrival time
};

// E of algorithms.md's gcra: P / L rounded up to a whole µs. Policy::Validate refuses the
// policies where the rounding slows the rate by more than 0.1%.
constexpr std::int64_t GcraEmissionUs(const Policy& policy) {
  return (policy.period.count() + policy.limit - 1) / policy.limit;
}

struct SmoothBucketState {
  double tokens;  // t0: the level at `last`
  std::int64_t last;
};

struct IntervalBucketState {
  double tokens;  // always a whole number; double so arithmetic matches Lua bit for bit
  std::int64_t last;
};

struct FixedWindowState {
  std::int64_t window;  // floor(t / P) of the counted window
  std::int64_t count;
};

struct SlidingWindowState {
  std::int64_t window;  // floor(t / P) of `cur`
  // Both are bounded by the limit (<= 10^9), so 32 bits keep the state at 16 bytes.
  std::uint32_t cur;
  std::uint32_t prev;
};

// What a decision asks of the store.
template <class State>
struct Outcome {
  Decision decision;
  // Set when the state must be saved. With ttl_us <= 0 the saved state is the fresh
  // state, so the store may delete the key instead.
  std::optional<State> write;
  std::int64_t ttl_us = 0;  // the key is fresh again after this long (algorithms.md TTLs)
};

Outcome<GcraState> DecideGcra(const Policy& policy, std::optional<GcraState> stored,
                              std::int64_t now, std::int64_t cost);

Outcome<SmoothBucketState> DecideSmoothBucket(const Policy& policy,
                                              std::optional<SmoothBucketState> stored,
                                              std::int64_t now, std::int64_t cost);

Outcome<IntervalBucketState> DecideIntervalBucket(const Policy& policy,
                                                  std::optional<IntervalBucketState> stored,
                                                  std::int64_t now, std::int64_t cost);

Outcome<FixedWindowState> DecideFixedWindow(const Policy& policy,
                                            std::optional<FixedWindowState> stored,
                                            std::int64_t now, std::int64_t cost);

Outcome<SlidingWindowState> DecideSlidingWindow(const Policy& policy,
                                                std::optional<SlidingWindowState> stored,
                                                std::int64_t now, std::int64_t cost);

// The log is updated in place (copying it per decision would cost O(L)); the returned
// ttl_us is when the key may be dropped (0: the log is empty).
struct LogOutcome {
  Decision decision;
  std::int64_t ttl_us = 0;
};
LogOutcome DecideSlidingLog(const Policy& policy, SlidingLog& log, std::int64_t now,
                            std::int64_t cost);

}  // namespace floodgate::core

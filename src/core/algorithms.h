#pragma once

// The five algorithms as pure functions of (policy, state, now, cost): the C++ definition.
//
// The contract is docs/algorithms.md. No I/O, no clocks, no locks: stores fetch the state, call one
// of these, and save what they are told to save. lua/ holds the only other definition;
// tests/vectors proves the two agree.
//
// Conventions shared by every function here:
// - Times are integer µs on the Unix epoch; `cost` is 0..kMaxCost; the policy is valid.
// - `stored` is the key's state, or null when it has none (the missing state of
//   docs/algorithms.md). The answer is written into `decision`, every field of it; what the
//   store must save comes back as an Outcome.
// - cost 0 is a peek: always allowed, never asks for a write.
// - `remaining` is clamped to >= 0.
// - Time going backwards is clamped to the newest time the key's state has seen, so
//   waits are never negative and no refill is counted twice.
//
// Why the answer is an out-parameter, and why the value-state algorithms are defined in
// headers: a store's decision then compiles into one function that writes the Decision
// once, where its caller will read it. Returned through memory and copied as a whole, a
// Decision written field by field is read back with wider loads than it was stored with,
// which stalls store-to-load forwarding; with the state passed as an optional, the same.
// Those stalls measured as a third of an in-memory decision.

#include <floodgate/decision.h>
#include <floodgate/policy.h>

#include <cstdint>
#include <optional>

#include "core/sliding_log.h"

namespace floodgate::core {

struct GcraState {
  std::int64_t tat;  // theoretical arrival time
};

// E of docs/algorithms.md's gcra: P / L rounded up to a whole µs. Policy::Validate refuses the
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
  std::int64_t window;  // floor(t / P) of the counted window (with tz: its ordinal, core/calendar.h)
  std::int64_t count;
};

struct SlidingWindowState {
  std::int64_t window;  // floor(t / P) of `cur` (with tz: its ordinal, core/calendar.h)
  // Both are bounded by the limit (<= 10^9), so 32 bits keep the state at 16 bytes.
  std::uint32_t cur;
  std::uint32_t prev;
};

// What a decision asks of the store besides its answer.
template <class State>
struct Outcome {
  // Set when the state must be saved. With ttl_us <= 0 the saved state is the fresh
  // state, so the store may delete the key instead.
  std::optional<State> write;
  std::int64_t ttl_us = 0;  // the key is fresh again after this long (docs/algorithms.md TTLs)
};

// gcra, the default, is inlined into every store's decision: called out of line (the
// compiler's choice for a function used at several sites) its call, prologue and the
// Outcome returned through memory were ~25 instructions of an in-memory decision's ~700.
[[gnu::always_inline]] inline Outcome<GcraState> DecideGcra(const Policy& policy,
                                                            const GcraState* stored,
                                                            std::int64_t now, std::int64_t cost,
                                                            Decision& decision);

inline Outcome<SmoothBucketState> DecideSmoothBucket(const Policy& policy,
                                                     const SmoothBucketState* stored,
                                                     std::int64_t now, std::int64_t cost,
                                                     Decision& decision);

inline Outcome<IntervalBucketState> DecideIntervalBucket(const Policy& policy,
                                                         const IntervalBucketState* stored,
                                                         std::int64_t now, std::int64_t cost,
                                                         Decision& decision);

inline Outcome<FixedWindowState> DecideFixedWindow(const Policy& policy,
                                                   const FixedWindowState* stored, std::int64_t now,
                                                   std::int64_t cost, Decision& decision);

inline Outcome<SlidingWindowState> DecideSlidingWindow(const Policy& policy,
                                                       const SlidingWindowState* stored,
                                                       std::int64_t now, std::int64_t cost,
                                                       Decision& decision);

// The log is updated in place (copying it per decision would cost O(L)). Returns when
// the key may be dropped (0: the log is empty). With `append` false an admission is
// decided but its run left out (the log is still trimmed): CommitSlidingLog adds it, for
// a multi-decision that learns only later whether every item allows.
std::int64_t DecideSlidingLog(const Policy& policy, SlidingLog& log, std::int64_t now,
                              std::int64_t cost, Decision& decision, bool append = true);
void CommitSlidingLog(SlidingLog& log, std::int64_t now, std::int64_t cost);

// Where a decision under delay=D may start: at `not_before` or later, and at most `max_wait`
// after now. A single decision's own window is {now, D} (OwnWindow); a multi-decision
// (docs/algorithms.md, "Waiting", multi-decisions; core/multi.h) charges its items at the
// latest item's start s with the window {s, min D_i}, and answers a denial with {now, min D_i}.
struct DelayWindow {
  std::int64_t not_before;
  std::int64_t max_wait;
};

inline DelayWindow OwnWindow(const Policy& policy, std::int64_t now) {
  return DelayWindow{now, policy.delay.count()};
}

// The same decisions under delay=D (docs/algorithms.md, "Waiting"; core/delay.h): the
// Decide* functions above hand a policy with a delay to these, with its OwnWindow. A
// request that fits within the window is admitted and charged as a decision at its start
// time `s` (the earliest time >= window.not_before at which it fits), and answered with
// delay s - now; else denied with retry_after s - now - window.max_wait.
inline Outcome<GcraState> DelayGcra(const Policy& policy, const GcraState* stored, std::int64_t now,
                                    std::int64_t cost, Decision& decision, DelayWindow window);
inline Outcome<SmoothBucketState> DelaySmoothBucket(const Policy& policy,
                                                    const SmoothBucketState* stored,
                                                    std::int64_t now, std::int64_t cost,
                                                    Decision& decision, DelayWindow window);
inline Outcome<IntervalBucketState> DelayIntervalBucket(const Policy& policy,
                                                        const IntervalBucketState* stored,
                                                        std::int64_t now, std::int64_t cost,
                                                        Decision& decision, DelayWindow window);
std::int64_t DelaySlidingLog(const Policy& policy, SlidingLog& log, std::int64_t now,
                             std::int64_t cost, Decision& decision, bool append,
                             DelayWindow window);

}  // namespace floodgate::core

// The definitions (see above for why they are in headers).
#include "core/delay.h"         // IWYU pragma: export
#include "core/gcra.h"          // IWYU pragma: export
#include "core/token_bucket.h"  // IWYU pragma: export
#include "core/windows.h"       // IWYU pragma: export

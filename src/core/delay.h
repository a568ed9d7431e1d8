#pragma once

// gcra and token_bucket under delay=D: the same steps as lua/gcra.lua and lua/token_bucket.lua.
//
// docs/algorithms.md, "Waiting (delay=D)", revision 4. A request that would be denied now but
// fits at a time s with s - now <= D is admitted and charged as a decision at s; the caller
// waits s - now before it proceeds. Every state these store is the state an immediate
// admission at s would store, so the schedule of proceed times is one the plain algorithm
// admits (tests/delay_model_test.cc). Included by core/algorithms.h, which declares them.

#include <algorithm>

#include "core/algorithms.h"
#include "core/arith.h"
#include "core/token_bucket.h"

namespace floodgate::core {

inline Outcome<GcraState> DelayGcra(const Policy& policy, const GcraState* stored, std::int64_t now,
                                    std::int64_t cost, Decision& decision, DelayWindow window) {
  const std::int64_t emission = GcraEmissionUs(policy);
  const std::int64_t burst = policy.capacity();
  const std::int64_t tau = burst * emission;
  const std::int64_t tat = stored != nullptr ? std::max(stored->tat, now) : now;
  const std::int64_t room = std::max<std::int64_t>(0, now + tau - tat);

  Outcome<GcraState> out;
  if (cost == 0 || cost > burst) {  // a peek, or never: as without delay
    SetDecision(decision, cost == 0, policy.limit, room / emission, -1, tat - now);
    MarkDelayable(decision, 0);
    return out;
  }
  // s - now: the request fits once tat + c*E - tau has passed, and not before the window.
  const std::int64_t wait =
      std::max({std::int64_t{0}, tat + cost * emission - tau - now, window.not_before - now});
  if (wait > window.max_wait) {
    SetDecision(decision, false, policy.limit, 0, wait - window.max_wait, tat - now);
    MarkDelayable(decision, 0);
    return out;
  }
  // Charged as a decision at s: tat moves up to s first. On its own a request's s is at
  // most tat (c*E <= tau), so this is tat + c*E; a multi-decision's later s moves it on.
  const std::int64_t next = std::max(tat, now + wait) + cost * emission;
  SetDecision(decision, true, policy.limit, wait == 0 ? (now + tau - next) / emission : 0, 0,
              next - now);
  MarkDelayable(decision, wait);
  out.write = GcraState{next};
  out.ttl_us = next - now;
  return out;
}

inline Outcome<SmoothBucketState> DelaySmoothBucket(const Policy& policy,
                                                    const SmoothBucketState* stored,
                                                    std::int64_t now, std::int64_t cost,
                                                    Decision& decision, DelayWindow window) {
  const double capacity = D(policy.capacity());
  const SmoothBucketState before = stored != nullptr ? *stored : SmoothBucketState{capacity, now};
  // Tokens exist only from `last` on: a `last` ahead of now is a scheduled charge.
  const std::int64_t from = std::max(now, before.last);
  const SmoothLevel level(policy, before, from);
  const std::int64_t ahead = from - now;
  const std::int64_t full = ahead + level.Wait(capacity);

  Outcome<SmoothBucketState> out;
  if (cost == 0 || cost > policy.capacity()) {  // a peek, or never: as without delay
    const std::int64_t remaining = before.last > now ? 0 : FloorToInt(level.At(0));
    SetDecision(decision, cost == 0, policy.limit, remaining, -1, full);
    MarkDelayable(decision, 0);
    return out;
  }
  // s - now; the level only grows, so the bucket holds the cost at any later start too.
  const std::int64_t wait = std::max(ahead + level.Wait(D(cost)), window.not_before - now);
  if (wait > window.max_wait) {
    SetDecision(decision, false, policy.limit, 0, wait - window.max_wait, full);
    MarkDelayable(decision, 0);
    return out;
  }
  const SmoothBucketState after{level.At(wait - ahead) - D(cost), now + wait};
  const std::int64_t reset = wait + SmoothLevel(policy, after, now + wait).Wait(capacity);
  SetDecision(decision, true, policy.limit, wait == 0 ? FloorToInt(after.tokens) : 0, 0, reset);
  MarkDelayable(decision, wait);
  out.write = after;
  out.ttl_us = reset;
  return out;
}

inline Outcome<IntervalBucketState> DelayIntervalBucket(const Policy& policy,
                                                        const IntervalBucketState* stored,
                                                        std::int64_t now, std::int64_t cost,
                                                        Decision& decision, DelayWindow window) {
  const double capacity = D(policy.capacity());
  const double limit = D(policy.limit);
  const double period = D(policy.period.count());
  std::int64_t from = now;
  const IntervalBucketState state = RefillInterval(policy, stored, from);  // from = max(now, last)
  // The earliest refill boundary at which the bucket holds x tokens, as a wait from now.
  const auto until = [&](const IntervalBucketState& s, double x) {
    return static_cast<std::int64_t>(D(s.last) + std::ceil((x - s.tokens) / limit) * period -
                                     D(now));
  };
  const auto full = [&](const IntervalBucketState& s) {
    return s.tokens >= capacity ? std::int64_t{0} : until(s, capacity);
  };

  Outcome<IntervalBucketState> out;
  if (cost == 0 || cost > policy.capacity()) {  // a peek, or never: as without delay
    const bool scheduled = stored != nullptr && stored->last > now;
    SetDecision(decision, cost == 0, policy.limit, scheduled ? 0 : FloorToInt(state.tokens), -1,
                full(state));
    MarkDelayable(decision, 0);
    return out;
  }
  const std::int64_t wait = std::max(state.tokens >= D(cost) ? from - now : until(state, D(cost)),
                                     window.not_before - now);
  if (wait > window.max_wait) {
    SetDecision(decision, false, policy.limit, 0, wait - window.max_wait, full(state));
    MarkDelayable(decision, 0);
    return out;
  }
  std::int64_t start = now + wait;
  IntervalBucketState after = RefillInterval(policy, &state, start);
  after.tokens -= D(cost);
  const std::int64_t reset = full(after);
  SetDecision(decision, true, policy.limit, wait == 0 ? FloorToInt(after.tokens) : 0, 0, reset);
  MarkDelayable(decision, wait);
  out.write = after;
  out.ttl_us = reset;
  return out;
}

// The three above by their state type, for a store that visits a key's state by type
// (memory://'s multi-decisions, core/multi.h Redecide).
inline Outcome<GcraState> DecideInWindow(const Policy& policy, const GcraState* stored,
                                         std::int64_t now, std::int64_t cost, Decision& decision,
                                         DelayWindow window) {
  return DelayGcra(policy, stored, now, cost, decision, window);
}
inline Outcome<SmoothBucketState> DecideInWindow(const Policy& policy,
                                                 const SmoothBucketState* stored, std::int64_t now,
                                                 std::int64_t cost, Decision& decision,
                                                 DelayWindow window) {
  return DelaySmoothBucket(policy, stored, now, cost, decision, window);
}
inline Outcome<IntervalBucketState> DecideInWindow(const Policy& policy,
                                                   const IntervalBucketState* stored,
                                                   std::int64_t now, std::int64_t cost,
                                                   Decision& decision, DelayWindow window) {
  return DelayIntervalBucket(policy, stored, now, cost, decision, window);
}

}  // namespace floodgate::core

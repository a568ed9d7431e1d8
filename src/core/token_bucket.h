#pragma once

// token_bucket, both refill modes: the same steps as lua/token_bucket.lua.
//
// docs/algorithms.md, "token_bucket". Included by core/algorithms.h, which declares them.

#include <algorithm>

#include "core/algorithms.h"
#include "core/arith.h"

namespace floodgate::core {

// The smooth bucket's level after waiting d more µs with no traffic, and the smallest
// such wait that reaches a level.
class SmoothLevel {
 public:
  SmoothLevel(const Policy& policy, SmoothBucketState state, std::int64_t now)
      : capacity_(D(policy.capacity())),
        limit_(D(policy.limit)),
        period_(D(policy.period.count())),
        state_(state),
        now_(now) {}

  double At(std::int64_t d) const {
    return std::min(
        capacity_,
        state_.tokens + D(std::max<std::int64_t>(0, now_ + d - state_.last)) * limit_ / period_);
  }

  // The smallest whole d >= 0 with At(d) >= x: the closed form, then corrected by a
  // step either way in case the doubles rounded it off by one.
  std::int64_t Wait(double x) const {
    std::int64_t d = std::max<std::int64_t>(
        0, CeilToInt((x - state_.tokens) * period_ / limit_ - D(now_ - state_.last)));
    while (d > 0 && At(d - 1) >= x) --d;
    while (At(d) < x) ++d;
    return d;
  }

 private:
  double capacity_, limit_, period_;
  SmoothBucketState state_;
  std::int64_t now_;
};

inline Outcome<SmoothBucketState> DecideSmoothBucket(const Policy& policy,
                                                     const SmoothBucketState* stored,
                                                     std::int64_t now, std::int64_t cost,
                                                     Decision& decision) {
  if (policy.delay.count() > 0)
    return DelaySmoothBucket(policy, stored, now, cost, decision, OwnWindow(policy, now));
  const double capacity = D(policy.capacity());
  const SmoothBucketState before = stored != nullptr ? *stored : SmoothBucketState{capacity, now};
  now = std::max(now, before.last);
  const double tokens = SmoothLevel(policy, before, now).At(0);

  Outcome<SmoothBucketState> out;
  if (cost == 0 || tokens >= D(cost)) {  // a peek allows even a bucket an overcharge emptied
    SmoothBucketState after = before;
    if (cost > 0) {
      after = SmoothBucketState{tokens - D(cost), now};
      out.write = after;
    }
    const std::int64_t reset = SmoothLevel(policy, after, now).Wait(capacity);
    SetDecision(decision, true, policy.limit, FloorToInt(tokens - D(cost)), 0, reset);
    out.ttl_us = reset;
    return out;
  }
  const SmoothLevel level(policy, before, now);
  const std::int64_t retry = cost > policy.capacity() ? -1 : level.Wait(D(cost));
  SetDecision(decision, false, policy.limit, FloorToInt(tokens), retry, level.Wait(capacity));
  return out;
}

// The interval bucket as it stands at `now` (clamped to the stored `last`, in place):
// every refill due added, capped.
inline IntervalBucketState RefillInterval(const Policy& policy, const IntervalBucketState* stored,
                                          std::int64_t& now) {
  const double capacity = D(policy.capacity());
  IntervalBucketState state = stored != nullptr ? *stored : IntervalBucketState{capacity, now};
  now = std::max(now, state.last);
  const double period = D(policy.period.count());
  const double refills = std::floor(D(now - state.last) / period);
  if (refills > 0) {
    state.tokens = std::min(capacity, state.tokens + refills * D(policy.limit));
    state.last = static_cast<std::int64_t>(D(state.last) + refills * period);
  }
  if (state.tokens >= capacity) state.last = now;  // a full bucket has no refill phase
  return state;
}

inline Outcome<IntervalBucketState> DecideIntervalBucket(const Policy& policy,
                                                         const IntervalBucketState* stored,
                                                         std::int64_t now, std::int64_t cost,
                                                         Decision& decision) {
  if (policy.delay.count() > 0)
    return DelayIntervalBucket(policy, stored, now, cost, decision, OwnWindow(policy, now));
  const double capacity = D(policy.capacity());
  const double limit = D(policy.limit);
  const double period = D(policy.period.count());
  IntervalBucketState state = RefillInterval(policy, stored, now);

  const bool allowed = cost == 0 || state.tokens >= D(cost);
  if (allowed) state.tokens -= D(cost);
  const auto wait_for = [&](double x) {
    return static_cast<std::int64_t>(D(state.last) +
                                     std::ceil((x - state.tokens) / limit) * period - D(now));
  };
  const std::int64_t retry = allowed ? 0 : (cost > policy.capacity() ? -1 : wait_for(D(cost)));
  const std::int64_t reset = state.tokens >= capacity ? 0 : wait_for(capacity);

  Outcome<IntervalBucketState> out;
  SetDecision(decision, allowed, policy.limit, FloorToInt(state.tokens), retry, reset);
  // Writing back a refill that is already due changes no later decision; a peek or a
  // denial only saves when there was something to save.
  if (cost > 0 || stored != nullptr) {
    out.write = state;
    out.ttl_us = reset;
  }
  return out;
}

}  // namespace floodgate::core

#pragma once

// take(k, δ): the largest lease of up to k units one instance may spend within δ, pure.
//
// docs/algorithms.md "Take up to k" and docs/prefetch.md (the bound, its proof sketch, and where
// the rule differs from the spec's first wording). Conventions as core/algorithms.h. One idea for
// every algorithm: a lease is checked as if its units were all spent at `now` (the earliest they
// may be) and charged to the state as if they were all spent at the lease's end (the latest), so
// whatever its holder does in between, no later decision sees more room than it would have had.
// - windows: the check of a decision of cost k' at now; the lease ends with the window.
// - sliding_log: that check, with the run stamped at now + δ (core/sliding_log.cc).
// - gcra: tat raised to now + δ before the decision of cost k' at now (so k' <= (tau - δ) / E on
//   a key with room); nothing when tau - δ < E.
// - token_bucket: the level capped at the capacity less what refills in (now, now + δ], stored
//   so (the tokens above that cap are dropped), before the decision of cost k' at now; nothing
//   when that cap is < 1. Smooth: ceil(L·δ/P); interval: L per refill instant in the lease.
// k' = 0 (NoLease): nothing is charged or written; the answer is a cost-1 decision's when it
// denies, else the peek ("decide per request", include/floodgate/reservation.h TakeRequest).
// Every k' is a closed form (a division or a floor), corrected by at most a step where doubles
// round; the decision itself is the algorithm's own, at cost k', on the leased state.

#include <algorithm>
#include <cstdint>

#include "core/algorithms.h"
#include "core/arith.h"

namespace floodgate::core {

// What a take leased.
struct LeaseGrant {
  std::int64_t units = 0;  // k' (0: nothing held)
  // µs: the holder spends before it, and units not returned by then count as spent.
  std::int64_t ends = 0;
};

template <class State>
struct TakeOutcome {
  Outcome<State> out;  // what to save (nothing when units = 0)
  LeaseGrant lease;
};

template <class State>
using DecideFn = Outcome<State> (*)(const Policy&, const State*, std::int64_t, std::int64_t,
                                    Decision&);

// k' = 0: the answer of a cost-1 request when it is denied, else the peek. Nothing is saved.
template <class State>
TakeOutcome<State> NoLease(DecideFn<State> decide, const Policy& policy, const State* stored,
                           std::int64_t now, Decision& decision) {
  decide(policy, stored, now, 1, decision);
  if (decision.allowed) decide(policy, stored, now, 0, decision);
  return {};
}

// The decision of cost min(up_to, room) on the leased state, or NoLease when that is 0.
template <class State>
TakeOutcome<State> LeaseOf(DecideFn<State> decide, const Policy& policy, const State* stored,
                           const State& leased, std::int64_t room, std::int64_t now,
                           std::int64_t up_to, std::int64_t ends, Decision& decision) {
  const std::int64_t units = std::min(up_to, room);
  if (units <= 0) return NoLease(decide, policy, stored, now, decision);
  TakeOutcome<State> take;
  take.out = decide(policy, &leased, now, units, decision);
  take.lease = {units, ends};
  return take;
}

inline TakeOutcome<GcraState> Take(const Policy& policy, const GcraState* stored, std::int64_t now,
                                   std::int64_t up_to, std::int64_t lifetime, Decision& decision) {
  const std::int64_t emission = GcraEmissionUs(policy);
  const std::int64_t tau = policy.capacity() * emission;
  if (tau - lifetime < emission) return NoLease(&DecideGcra, policy, stored, now, decision);
  const std::int64_t tat = stored != nullptr ? std::max(stored->tat, now) : now;
  const GcraState leased{std::max(tat, now + lifetime)};
  const std::int64_t room = std::max<std::int64_t>(0, now + tau - leased.tat) / emission;
  return LeaseOf(&DecideGcra, policy, stored, leased, room, now, up_to, now + lifetime, decision);
}

// ceil(L·δ/P): the tokens a smooth bucket refills in δ, rounded up.
inline std::int64_t SmoothRefillIn(const Policy& policy, std::int64_t lifetime) {
  return CeilToInt(D(policy.limit) * D(lifetime) / D(policy.period.count()));
}

inline TakeOutcome<SmoothBucketState> Take(const Policy& policy, const SmoothBucketState* stored,
                                           std::int64_t now, std::int64_t up_to,
                                           std::int64_t lifetime, Decision& decision) {
  const std::int64_t cap = policy.capacity() - SmoothRefillIn(policy, lifetime);
  if (cap < 1) return NoLease(&DecideSmoothBucket, policy, stored, now, decision);
  const SmoothBucketState before =
      stored != nullptr ? *stored : SmoothBucketState{D(policy.capacity()), now};
  const std::int64_t at = std::max(now, before.last);
  const SmoothBucketState leased{std::min(D(cap), SmoothLevel(policy, before, at).At(0)), at};
  return LeaseOf(&DecideSmoothBucket, policy, stored, leased, FloorToInt(leased.tokens), now, up_to,
                 now + lifetime, decision);
}

inline TakeOutcome<IntervalBucketState> Take(const Policy& policy,
                                             const IntervalBucketState* stored, std::int64_t now,
                                             std::int64_t up_to, std::int64_t lifetime,
                                             Decision& decision) {
  std::int64_t at = now;
  IntervalBucketState leased = RefillInterval(policy, stored, at);
  // Refill instants last + i·P in (at, at + δ]: at - last < P after RefillInterval.
  const std::int64_t refills = (at + lifetime - leased.last) / policy.period.count();
  const double cap = D(policy.capacity()) - D(refills) * D(policy.limit);
  if (cap < 1) return NoLease(&DecideIntervalBucket, policy, stored, now, decision);
  leased.tokens = std::min(cap, leased.tokens);
  return LeaseOf(&DecideIntervalBucket, policy, stored, leased, FloorToInt(leased.tokens), now,
                 up_to, now + lifetime, decision);
}

inline TakeOutcome<FixedWindowState> Take(const Policy& policy, const FixedWindowState* stored,
                                          std::int64_t now, std::int64_t up_to,
                                          std::int64_t lifetime, Decision& decision) {
  const std::int64_t period = policy.period.count();
  const auto [at, w] = ClampedWindow(now, period, stored);
  const std::int64_t count = stored != nullptr && stored->window == w ? stored->count : 0;
  const std::int64_t ends = std::min(now + lifetime, (w + 1) * period);
  const FixedWindowState leased = stored != nullptr ? *stored : FixedWindowState{w, 0};
  return LeaseOf(&DecideFixedWindow, policy, stored, leased, policy.limit - count, now, up_to, ends,
                 decision);
}

inline TakeOutcome<SlidingWindowState> Take(const Policy& policy, const SlidingWindowState* stored,
                                            std::int64_t now, std::int64_t up_to,
                                            std::int64_t lifetime, Decision& decision) {
  const std::int64_t period = policy.period.count();
  const auto [at, w] = ClampedWindow(now, period, stored);
  const WindowCounts counts = CountsAt(stored, w);
  const double estimate =
      D(counts.prev) * D(period - (at - w * period)) / D(period) + D(counts.cur);
  std::int64_t room = FloorToInt(D(policy.limit) - estimate);
  if (room > 0 && estimate + D(room) > D(policy.limit)) --room;  // the subtraction rounded up
  const std::int64_t ends = std::min(now + lifetime, (w + 1) * period);
  const SlidingWindowState leased = stored != nullptr ? *stored : SlidingWindowState{w, 0, 0};
  return LeaseOf(&DecideSlidingWindow, policy, stored, leased, room, now, up_to, ends, decision);
}

// The log is updated in place; returns its TTL as DecideSlidingLog does. The run is stamped at
// the lease's end (clamped now + δ), and the runs a decision clamped to that stamp would drop
// too early (those at or before stamp - P) are merged into one run at stamp - P + 1
// (docs/prefetch.md, "sliding_log").
std::int64_t TakeSlidingLog(const Policy& policy, SlidingLog& log, std::int64_t now,
                            std::int64_t up_to, std::int64_t lifetime, Decision& decision,
                            LeaseGrant& lease);

}  // namespace floodgate::core

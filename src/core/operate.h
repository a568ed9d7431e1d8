#pragma once

// Operating a key: reset, refund(u), penalize(u) as pure functions of (policy, state, now, units).
//
// docs/algorithms.md, "Operating a key" (revision 4); lua/operate.lua is the other definition and
// tests/vectors/operate_*.json proves the two agree. Conventions of core/algorithms.h; besides:
// - Each returns what the store saves (ttl_us <= 0: drop the key) and writes the key's peek
//   (cost 0) after the operation into `decision`, without the block (the store adds it:
//   a reset removes it, a refund or a penalty leaves it as it is).
// - A penalty may take a key past its limit, but not further than a settle's overcharge may
//   (kMaxSettleWaitUs beyond a full key, core/settle.h), so every value stays exact in the
//   doubles Lua computes with and no TTL overflows.

#include <floodgate/store.h>

#include <algorithm>
#include <cstdint>

#include "core/algorithms.h"
#include "core/settle.h"

namespace floodgate::core {

// The answer and the write of an operation: the peek after `out`, and `out` kept as long as
// that peek's reset (a reset, or a state that is fresh again, drops the key).
template <typename State>
Outcome<State> PeekAfterOperation(Outcome<State> out,
                                  Outcome<State> (*decide)(const Policy&, const State*,
                                                           std::int64_t, std::int64_t, Decision&),
                                  const Policy& policy, const State* stored, std::int64_t now,
                                  Decision& decision) {
  return PeekAfterSettle(std::move(out), decide, policy, stored, now, decision);
}

inline Outcome<GcraState> Operate(const Policy& policy, const GcraState* stored, std::int64_t now,
                                  KeyOperation op, std::int64_t units, Decision& decision) {
  const std::int64_t emission = GcraEmissionUs(policy);
  const std::int64_t tat = stored != nullptr ? std::max(stored->tat, now) : now;
  Outcome<GcraState> out;
  switch (op) {
    case KeyOperation::kReset:
      out.write = GcraState{now};
      break;
    case KeyOperation::kRefund:  // tat = max(now, tat - u*E), without the product overflowing
      out.write = GcraState{units > (tat - now) / emission ? now : tat - units * emission};
      break;
    case KeyOperation::kPenalize: {  // tat + u*E, up to a settle's overcharge
      const std::int64_t ceiling = now + policy.capacity() * emission + kMaxSettleWaitUs;
      out.write = GcraState{units <= (ceiling - tat) / emission ? tat + units * emission : ceiling};
      break;
    }
  }
  return PeekAfterOperation(std::move(out), &DecideGcra, policy, stored, now, decision);
}

inline Outcome<SmoothBucketState> Operate(const Policy& policy, const SmoothBucketState* stored,
                                          std::int64_t now, KeyOperation op, std::int64_t units,
                                          Decision& decision) {
  const double capacity = D(policy.capacity());
  const SmoothBucketState before = stored != nullptr ? *stored : SmoothBucketState{capacity, now};
  // The peek after is at the caller's now: under delay= a `last` ahead is a scheduled
  // charge (the tokens there are not the caller's yet), and without it the peek clamps too.
  const std::int64_t asked = now;
  now = std::max(now, before.last);
  const double tokens = SmoothLevel(policy, before, now).At(0);
  Outcome<SmoothBucketState> out;
  switch (op) {
    case KeyOperation::kReset:  // fresh at the caller's now: a scheduled charge goes too
      out.write = SmoothBucketState{capacity, asked};
      break;
    case KeyOperation::kRefund:
      out.write = SmoothBucketState{std::min(capacity, tokens + D(units)), now};
      break;
    case KeyOperation::kPenalize:
      out.write = SmoothBucketState{std::max(BucketFloor(policy), tokens - D(units)), now};
      break;
  }
  return PeekAfterOperation(std::move(out), &DecideSmoothBucket, policy, stored, asked, decision);
}

inline Outcome<IntervalBucketState> Operate(const Policy& policy, const IntervalBucketState* stored,
                                            std::int64_t now, KeyOperation op, std::int64_t units,
                                            Decision& decision) {
  const double capacity = D(policy.capacity());
  const std::int64_t asked = now;                                   // the peek's, as above
  IntervalBucketState state = RefillInterval(policy, stored, now);  // clamps now
  switch (op) {
    case KeyOperation::kReset:  // as the smooth bucket's
      state = IntervalBucketState{capacity, asked};
      break;
    case KeyOperation::kRefund:
      state.tokens = std::min(capacity, state.tokens + D(units));
      if (state.tokens >= capacity) state.last = now;  // a full bucket has no refill phase
      break;
    case KeyOperation::kPenalize:
      state.tokens = std::max(std::floor(BucketFloor(policy)), state.tokens - D(units));
      break;
  }
  Outcome<IntervalBucketState> out;
  out.write = state;
  return PeekAfterOperation(std::move(out), &DecideIntervalBucket, policy, stored, asked, decision);
}

inline Outcome<FixedWindowState> Operate(const Policy& policy, const FixedWindowState* stored,
                                         std::int64_t now, KeyOperation op, std::int64_t units,
                                         Decision& decision) {
  const WindowSpan span = WindowSpanAt(policy, now, stored);
  const std::int64_t count = stored != nullptr && stored->window == span.window ? stored->count : 0;
  Outcome<FixedWindowState> out;
  switch (op) {
    case KeyOperation::kReset:
      out.write = FixedWindowState{span.window, 0};
      break;
    case KeyOperation::kRefund:
      out.write = FixedWindowState{span.window, SettledCount(policy, count, -units)};
      break;
    case KeyOperation::kPenalize:
      out.write = FixedWindowState{span.window, SettledCount(policy, count, units)};
      break;
  }
  return PeekAfterOperation(std::move(out), &DecideFixedWindow, policy, stored, span.now, decision);
}

inline Outcome<SlidingWindowState> Operate(const Policy& policy, const SlidingWindowState* stored,
                                           std::int64_t now, KeyOperation op, std::int64_t units,
                                           Decision& decision) {
  const WindowSpan span = WindowSpanAt(policy, now, stored);
  const WindowCounts counts = CountsAt(stored, span.window);
  std::int64_t cur = counts.cur;
  std::int64_t prev = counts.prev;
  switch (op) {
    case KeyOperation::kReset:
      cur = prev = 0;
      break;
    case KeyOperation::kRefund:  // only the current window: what was admitted before stays
      cur = SettledCount(policy, cur, -units);
      break;
    case KeyOperation::kPenalize:
      cur = SettledCount(policy, cur, units);
      break;
  }
  Outcome<SlidingWindowState> out;
  out.write = SlidingWindowState{span.window, static_cast<std::uint32_t>(cur),
                                 static_cast<std::uint32_t>(prev)};
  return PeekAfterOperation(std::move(out), &DecideSlidingWindow, policy, stored, span.now,
                            decision);
}

// The log is updated in place; returns when the key may be dropped (0: the log is empty).
// A refund takes the newest units out (whole runs from the newest, the last one split); a
// penalty appends a run at now, so the log may hold more than L units until they age out.
std::int64_t OperateSlidingLog(const Policy& policy, SlidingLog& log, std::int64_t now,
                               KeyOperation op, std::int64_t units, Decision& decision);

}  // namespace floodgate::core

#pragma once

// gcra: the Generic Cell Rate Algorithm in whole µs, the same steps as lua/gcra.lua.
//
// docs/algorithms.md, "gcra (Generic Cell Rate Algorithm; the default)", revision 2.
// Every quantity is a whole number of µs, so a burst of B at one instant admits exactly
// B whatever P/L is (a fractional emission interval rounded up on every store lost up to
// 1 µs per admission, and the B-th request of a burst fell just short of tau).
// Included by core/algorithms.h, which declares it.

#include <algorithm>

#include "core/algorithms.h"
#include "core/arith.h"

namespace floodgate::core {

inline Outcome<GcraState> DecideGcra(const Policy& policy, const GcraState* stored,
                                     std::int64_t now, std::int64_t cost, Decision& decision) {
  if (policy.delay.count() > 0) [[unlikely]] {  // the rare option: its code kept off this path
    return DelayGcra(policy, stored, now, cost, decision, OwnWindow(policy, now));
  }
  const std::int64_t emission = GcraEmissionUs(policy);
  const std::int64_t burst = policy.capacity();
  const std::int64_t tau = burst * emission;  // < 367 d (Policy::Validate)
  const std::int64_t tat = stored != nullptr ? std::max(stored->tat, now) : now;
  // What the key could admit now, before this request: tat moves up to now + tau.
  const std::int64_t room = std::max<std::int64_t>(0, now + tau - tat);

  Outcome<GcraState> out;
  if (cost == 0) {  // peek
    SetDecision(decision, true, policy.limit, room / emission, 0, tat - now);
    return out;
  }
  if (cost > burst) {  // can never fit; also keeps cost * emission <= tau below
    SetDecision(decision, false, policy.limit, room / emission, -1, tat - now);
    return out;
  }
  const std::int64_t next = tat + cost * emission;
  const std::int64_t diff = now + tau - next;
  if (diff >= 0) {
    SetDecision(decision, true, policy.limit, Quotient(diff, emission), 0, next - now);
    out.write = GcraState{next};
    out.ttl_us = next - now;
    return out;
  }
  SetDecision(decision, false, policy.limit, Quotient(room, emission), -diff, tat - now);
  return out;
}

}  // namespace floodgate::core

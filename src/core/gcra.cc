// gcra: algorithms.md, "gcra (Generic Cell Rate Algorithm; the default)".
#include <algorithm>

#include "core/algorithms.h"
#include "core/arith.h"

namespace floodgate::core {

Outcome<GcraState> DecideGcra(const Policy& policy, std::optional<GcraState> stored,
                              std::int64_t now, std::int64_t cost) {
  const double emission = D(policy.period.count()) / D(policy.limit);
  const double tau = D(policy.capacity()) * emission;
  const std::int64_t tat = stored ? std::max(stored->tat, now) : now;
  const double next = D(tat) + D(cost) * emission;
  const double diff = D(now) - (next - tau);

  Outcome<GcraState> out;
  if (cost == 0) {  // peek: diff is now - (tat - tau), which may be a hair below 0
    out.decision =
        MakeDecision(true, policy.limit, FloorToInt(std::max(0.0, diff) / emission), 0, tat - now);
    return out;
  }
  if (diff >= 0) {
    const std::int64_t new_tat = CeilToInt(next);
    out.decision = MakeDecision(true, policy.limit, FloorToInt(diff / emission), 0, new_tat - now);
    out.write = GcraState{new_tat};
    out.ttl_us = new_tat - now;
    return out;
  }
  const std::int64_t retry = D(cost) * emission > tau ? -1 : CeilToInt(-diff);
  const std::int64_t remaining = FloorToInt(std::max(0.0, D(now) - (D(tat) - tau)) / emission);
  out.decision = MakeDecision(false, policy.limit, remaining, retry, tat - now);
  return out;
}

}  // namespace floodgate::core

// Operating a key on a sliding log: reset, refund(u), penalize(u) over its runs.

#include "core/operate.h"

#include <algorithm>

namespace floodgate::core {

// docs/algorithms.md, "Operating a key"; the value states' operations are in core/operate.h.
std::int64_t OperateSlidingLog(const Policy& policy, SlidingLog& log, std::int64_t now,
                               KeyOperation op, std::int64_t units, Decision& decision) {
  const std::int64_t asked = now;
  if (!log.empty()) now = std::max(now, log.newest().time);  // as DecideSlidingLog clamps
  log.DropThrough(now - policy.period.count());              // only counted units are given back
  switch (op) {
    case KeyOperation::kReset:
      log.DropThrough(now);
      break;
    case KeyOperation::kRefund:
      // Bounded by the runs: each step empties the newest run or ends the refund.
      while (units > 0 && !log.empty()) {
        const SlidingLog::Run newest = log.newest();
        const std::int64_t back = std::min(units, newest.count);
        log.AddToRun(newest.time, -back);
        units -= back;
      }
      break;
    case KeyOperation::kPenalize:
      log.Append(now, units);
      break;
  }
  const std::int64_t ttl = DecideSlidingLog(policy, log, now, 0, decision);
  return ttl > 0 ? ttl + (now - asked) : 0;
}

}  // namespace floodgate::core

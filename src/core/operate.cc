// Operating a key on a sliding log: reset, refund(u), penalize(u) over its runs.

#include "core/operate.h"

#include <algorithm>

namespace floodgate::core {

// docs/algorithms.md, "Operating a key"; the value states' operations are in core/operate.h.
std::int64_t OperateSlidingLog(const Policy& policy, SlidingLog& log, std::int64_t now,
                               KeyOperation op, std::int64_t units, Decision& decision) {
  const std::int64_t asked = now;
  // Under delay= the runs ahead of now are scheduled charges, not time gone backwards: only
  // runs at or before now - P leave, as DelaySlidingLog trims. Without, as DecideSlidingLog
  // clamps.
  const bool scheduled = policy.delay.count() > 0;
  if (!log.empty() && !scheduled) now = std::max(now, log.newest().time);
  log.DropThrough(now - policy.period.count());  // only counted units are given back
  // The log stays in time order: a penalty joins the newest run when that is ahead.
  const std::int64_t newest = log.empty() ? now : std::max(now, log.newest().time);
  switch (op) {
    case KeyOperation::kReset:
      log.DropThrough(newest);
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
      log.Append(newest, units);
      break;
  }
  const std::int64_t ttl = DecideSlidingLog(policy, log, now, 0, decision);
  return ttl > 0 ? ttl + (now - asked) : 0;
}

}  // namespace floodgate::core

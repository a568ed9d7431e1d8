// The sliding log: its ring buffer of runs, and DecideSlidingLog over it.

#include "core/sliding_log.h"

#include <algorithm>
#include <cassert>

#include "core/algorithms.h"
#include "core/arith.h"
#include "core/settle.h"
#include "core/take.h"

namespace floodgate::core {

namespace {
constexpr std::size_t kMinCapacity = 2;
}

void SlidingLog::DropThrough(std::int64_t cutoff) {
  while (size_ > 0 && oldest().time <= cutoff) {
    units_ -= oldest().count;
    head_ = (head_ + 1) & (capacity_ - 1);
    --size_;
  }
  if (size_ == 0) {
    buffer_.reset();
    capacity_ = head_ = 0;
  } else if (capacity_ > kMinCapacity && size_ * 4 <= capacity_) {
    Resize(capacity_ / 2);
  }
}

void SlidingLog::MergeThrough(std::int64_t cutoff, std::int64_t time) {
  std::int64_t merged = 0;
  while (size_ > 0 && oldest().time <= cutoff) {
    merged += oldest().count;
    head_ = (head_ + 1) & (capacity_ - 1);
    --size_;
  }
  if (merged == 0) return;
  // At least one run left its slot, so the one before the head is free.
  head_ = (head_ + capacity_ - 1) & (capacity_ - 1);
  buffer_[head_] = Run{time, merged};
  ++size_;
}

void SlidingLog::Append(std::int64_t time, std::int64_t count) {
  assert(count > 0);
  assert(size_ == 0 || time >= newest().time);
  units_ += count;
  if (size_ > 0 && newest().time == time) {
    buffer_[(head_ + size_ - 1) & (capacity_ - 1)].count += count;
    return;
  }
  if (size_ == capacity_) Resize(capacity_ == 0 ? kMinCapacity : capacity_ * 2);
  buffer_[(head_ + size_) & (capacity_ - 1)] = Run{time, count};
  ++size_;
}

bool SlidingLog::AddToRun(std::int64_t time, std::int64_t delta) {
  std::size_t i = size_;
  while (i > 0 && at(i - 1).time > time) --i;  // settles are of recent runs: search from the newest
  if (i == 0 || at(i - 1).time != time) return false;
  Run& run = buffer_[(head_ + i - 1) & (capacity_ - 1)];
  delta = std::max(delta, -run.count);
  run.count += delta;
  units_ += delta;
  if (run.count > 0) return true;
  for (std::size_t j = i - 1; j + 1 < size_; ++j) {
    buffer_[(head_ + j) & (capacity_ - 1)] = at(j + 1);
  }
  --size_;
  if (size_ == 0) {
    buffer_.reset();
    capacity_ = head_ = 0;
  }
  return true;
}

std::int64_t SlidingLog::TimeOfUnit(std::int64_t k) const {
  assert(k >= 1 && k <= units_);
  for (std::size_t i = 0; i < size_; ++i) {
    const Run& run = at(i);
    if (k <= run.count) return run.time;
    k -= run.count;
  }
  return newest().time;  // unreachable for a valid k
}

void SlidingLog::Resize(std::size_t capacity) {
  auto buffer = std::make_unique_for_overwrite<Run[]>(capacity);
  for (std::size_t i = 0; i < size_; ++i) buffer[i] = at(i);
  buffer_ = std::move(buffer);
  capacity_ = capacity;
  head_ = 0;
}

// sliding_log: docs/algorithms.md, "sliding_log (exact sliding window)".
std::int64_t DecideSlidingLog(const Policy& policy, SlidingLog& log, std::int64_t now,
                              std::int64_t cost, Decision& decision, bool append) {
  if (policy.delay.count() > 0) {
    return DelaySlidingLog(policy, log, now, cost, decision, append, OwnWindow(policy, now));
  }
  const std::int64_t period = policy.period.count();
  const std::int64_t limit = policy.limit;
  const std::int64_t asked = now;
  if (!log.empty()) now = std::max(now, log.newest().time);
  log.DropThrough(now - period);  // an entry exactly P old no longer counts

  const std::int64_t count = log.units();
  const bool allowed = cost == 0 || count + cost <= limit;
  const bool adds = allowed && cost > 0;
  if (adds && append) log.Append(now, cost);

  std::int64_t retry = 0;
  if (!allowed) retry = cost > limit ? -1 : log.TimeOfUnit(count + cost - limit) + period - now;
  // An admission is the newest run: P after it, the key is fresh.
  const std::int64_t reset = adds ? period : (log.empty() ? 0 : log.newest().time + period - now);

  SetDecision(decision, allowed, limit, limit - count - (adds ? cost : 0), retry, reset);
  // The key's TTL runs from the caller's now: a decision clamped forward (to a take's run
  // stamped at its lease's end, or after time went backwards) keeps it as long as its
  // newest run counts.
  return reset > 0 ? reset + (now - asked) : 0;
}

// sliding_log under delay=D: docs/algorithms.md, "Waiting". Only runs at or before now - P
// leave the log: the scheduled runs ahead of now keep every run that counts at their times.
std::int64_t DelaySlidingLog(const Policy& policy, SlidingLog& log, std::int64_t now,
                             std::int64_t cost, Decision& decision, bool append,
                             DelayWindow window) {
  const std::int64_t period = policy.period.count();
  const std::int64_t limit = policy.limit;
  log.DropThrough(now - period);
  const std::int64_t units = log.units();  // scheduled runs included: they are charged
  const std::int64_t held = log.empty() ? 0 : log.newest().time + period - now;
  if (cost == 0 || cost > limit) {  // a peek, or never: as without delay
    SetDecision(decision, cost == 0, limit, limit - units, -1, held);
    MarkDelayable(decision, 0);
    return held;
  }
  // The earliest t >= s0 at which the log's units in (t - P, t] plus this cost fit: the
  // k-th oldest unit must have aged out, k = units + cost - limit.
  // The count in (t - P, t] only falls as t passes the newest run: it fits at any later
  // start too, the window's included.
  std::int64_t start =
      std::max(window.not_before, log.empty() ? now : std::max(now, log.newest().time));
  if (units + cost > limit) {
    start = std::max(start, log.TimeOfUnit(units + cost - limit) + period);
  }
  const std::int64_t wait = start - now;
  if (wait > window.max_wait) {
    SetDecision(decision, false, limit, 0, wait - window.max_wait, held);
    MarkDelayable(decision, 0);
    return held;
  }
  if (append) log.Append(start, cost);
  SetDecision(decision, true, limit, wait == 0 ? limit - units - cost : 0, 0, wait + period);
  MarkDelayable(decision, wait);
  return wait + period;
}

void CommitSlidingLog(SlidingLog& log, std::int64_t now, std::int64_t cost) {
  if (!log.empty()) now = std::max(now, log.newest().time);  // as DecideSlidingLog clamps
  log.Append(now, cost);
}

std::int64_t SettleSlidingLog(const Policy& policy, SlidingLog& log, std::int64_t now,
                              const ReservationMark& mark, std::int64_t actual,
                              Decision& decision) {
  const std::int64_t asked = now;
  if (!log.empty()) now = std::max(now, log.newest().time);
  log.DropThrough(now - policy.period.count());  // as DecideSlidingLog: a run P old is gone
  const std::int64_t delta = actual - mark.estimate;
  if (delta != 0 && !log.AddToRun(mark.mark, delta) && delta > 0) {
    if (log.empty()) {
      log.Append(now, delta);
    } else {
      log.AddToRun(log.newest().time, delta);
    }
  }
  const std::int64_t ttl = DecideSlidingLog(policy, log, now, 0, decision);
  return ttl > 0 ? ttl + (now - asked) : 0;
}

}  // namespace floodgate::core

namespace floodgate::core {

std::int64_t TakeSlidingLog(const Policy& policy, SlidingLog& log, std::int64_t now,
                            std::int64_t up_to, std::int64_t lifetime, Decision& decision,
                            LeaseGrant& lease) {
  const std::int64_t period = policy.period.count();
  const std::int64_t at = log.empty() ? now : std::max(now, log.newest().time);
  log.DropThrough(at - period);
  lease.units = std::min(up_to, policy.limit - log.units());
  if (lease.units <= 0) {
    lease = {};
    std::int64_t ttl = DecideSlidingLog(policy, log, now, 1, decision, /*append=*/false);
    if (decision.allowed) ttl = DecideSlidingLog(policy, log, now, 0, decision);
    return ttl;
  }
  // Every later decision before the stamp is clamped to it (time going backwards), so it
  // trims through stamp - P: a run at or before that still counts in real time, and moves
  // to the first µs such a decision keeps.
  const std::int64_t stamp = std::max(at + lifetime, log.empty() ? at : log.newest().time);
  log.MergeThrough(stamp - period, stamp - period + 1);
  log.Append(stamp, lease.units);
  lease.ends = now + lifetime;
  SetDecision(decision, true, policy.limit, policy.limit - log.units(), 0, stamp + period - at);
  return stamp + period - now;
}

}  // namespace floodgate::core

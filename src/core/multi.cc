// How a multi-decision's item decisions combine (see core/multi.h), and its summary.

#include "core/multi.h"

#include <algorithm>

namespace floodgate {

Decision MultiDecision::Summary() const {
  Decision d = items.at(binding);
  d.allowed = allowed;
  d.retry_after = allowed ? std::chrono::microseconds(0) : retry_after;
  // Under delay= the request waits for the common start, whichever item binds.
  d.delay = delay;
  d.delayable =
      std::any_of(items.begin(), items.end(), [](const Decision& item) { return item.delayable; });
  d.degraded = degraded;
  return d;
}

namespace core {

bool MultiAllows(std::span<const CheckItem> items, std::span<const Decision> own) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!ItemAllows(items[i], own[i])) return false;
  }
  return true;
}

void Summarize(std::span<const CheckItem> items, MultiDecision& decision) {
  // One pass (a multi-decision's bookkeeping is a visible share of its cost in memory):
  // the lists, and the candidates for either answer's binding item.
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  // The denying item with the longest wait (the first on ties); -1 (never) is the longest.
  const auto longer = [](std::chrono::microseconds a, std::chrono::microseconds b) {
    if (b == Decision::kNever) return false;
    return a == Decision::kNever || a > b;
  };
  decision.denied_by.clear();
  decision.would_deny.clear();
  std::size_t least_enforced = kNone;  // the enforced item with the least remaining
  std::size_t least = 0;               // any item with the least remaining
  std::size_t longest = kNone;         // the denying enforced item with the longest wait
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Decision& own = decision.items[i];
    const bool shadow = items[i].shadow;
    if (!own.allowed) {
      if (shadow) {
        decision.would_deny.push_back(i);
      } else {
        decision.denied_by.push_back(i);
        if (longest == kNone || longer(own.retry_after, decision.items[longest].retry_after)) {
          longest = i;
        }
      }
    }
    if (!shadow &&
        (least_enforced == kNone || own.remaining < decision.items[least_enforced].remaining)) {
      least_enforced = i;
    }
    if (own.remaining < decision.items[least].remaining) least = i;
  }
  decision.delay = std::chrono::microseconds(0);
  if (decision.allowed) {
    // Every item that schedules was charged at the common start: its delay is the request's.
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (Schedules(items[i])) decision.delay = std::max(decision.delay, decision.items[i].delay);
    }
    // The enforced item with the least remaining (the first on ties); of every item when
    // all are shadows.
    decision.retry_after = std::chrono::microseconds(0);
    decision.binding = least_enforced != kNone ? least_enforced : least;
    return;
  }
  decision.binding = longest;
  decision.retry_after = decision.items[longest].retry_after;
}

bool Waits(std::span<const CheckItem> items) {
  return std::any_of(items.begin(), items.end(), [](const CheckItem& item) {
    return Schedules(item) && item.policy.delay.count() > 0;
  });
}

std::int64_t OwnWait(const CheckItem& item, const Decision& own) {
  if (own.allowed) return own.delay.count();
  if (own.retry_after == Decision::kNever) return -1;
  return own.retry_after.count() + item.policy.delay.count();
}

MultiStart StartOf(std::span<const CheckItem> items, std::span<const Decision> own) {
  MultiStart start;
  bool first = true;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!Schedules(items[i])) continue;
    const std::int64_t wait = OwnWait(items[i], own[i]);
    start.wait = wait < 0 || start.wait < 0 ? -1 : std::max(start.wait, wait);
    const std::int64_t allowance = items[i].policy.delay.count();
    start.allowance = first ? allowance : std::min(start.allowance, allowance);
    first = false;
  }
  return start;
}

std::optional<DelayWindow> Redecide(const CheckItem& item, const Decision& own,
                                    const MultiStart& start, std::int64_t now) {
  if (!Schedules(item) || item.policy.delay.count() == 0) return std::nullopt;
  if (start.Admits()) {
    if (start.wait == 0) return std::nullopt;  // admitted at once: its own decision is it
    return DelayWindow{now + start.wait, start.allowance};
  }
  const std::int64_t wait = OwnWait(item, own);
  if (wait >= 0 && wait <= start.allowance) return std::nullopt;  // not what denies
  return DelayWindow{now, start.allowance};
}

}  // namespace core
}  // namespace floodgate

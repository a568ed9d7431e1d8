// How a multi-decision's item decisions combine (see core/multi.h), and its summary.

#include "core/multi.h"

#include <algorithm>

namespace floodgate {

Decision MultiDecision::Summary() const {
  Decision d = items.at(binding);
  d.allowed = allowed;
  d.retry_after = allowed ? std::chrono::microseconds(0) : retry_after;
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
  if (decision.allowed) {
    // The enforced item with the least remaining (the first on ties); of every item when
    // all are shadows.
    decision.retry_after = std::chrono::microseconds(0);
    decision.binding = least_enforced != kNone ? least_enforced : least;
    return;
  }
  decision.binding = longest;
  decision.retry_after = decision.items[longest].retry_after;
}

}  // namespace core
}  // namespace floodgate

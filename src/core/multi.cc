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
    if (!items[i].shadow && items[i].cost > 0 && !own[i].allowed) return false;
  }
  return true;
}

void Summarize(std::span<const CheckItem> items, MultiDecision& decision) {
  decision.denied_by.clear();
  decision.would_deny.clear();
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (decision.items[i].allowed) continue;
    (items[i].shadow ? decision.would_deny : decision.denied_by).push_back(i);
  }
  if (decision.allowed) {
    decision.retry_after = std::chrono::microseconds(0);
    // The enforced item with the least remaining (the first on ties); every item when all
    // are shadows.
    const bool any_enforced =
        std::any_of(items.begin(), items.end(), [](const CheckItem& item) { return !item.shadow; });
    bool found = false;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (any_enforced && items[i].shadow) continue;
      if (!found || decision.items[i].remaining < decision.items[decision.binding].remaining) {
        decision.binding = i;
        found = true;
      }
    }
    return;
  }
  // The denying item with the longest wait (the first on ties); -1 (never) is the longest.
  const auto longer = [](std::chrono::microseconds a, std::chrono::microseconds b) {
    if (b == Decision::kNever) return false;
    return a == Decision::kNever || a > b;
  };
  decision.binding = decision.denied_by.front();
  for (std::size_t i : decision.denied_by) {
    if (longer(decision.items[i].retry_after, decision.items[decision.binding].retry_after)) {
      decision.binding = i;
    }
  }
  decision.retry_after = decision.items[decision.binding].retry_after;
}

}  // namespace core
}  // namespace floodgate

#pragma once

// How a multi-decision's item decisions combine: the one definition every store uses.
//
// docs/multi.md, "Decision" and "The answer", is the contract. The scripts in lua/ implement only
// the first rule (what is consumed); the combination is computed here from what they return.

#include <floodgate/multi.h>

#include <span>

namespace floodgate::core {

// Whether an item lets the request through, given its decision on its own: a shadow or a
// cost-0 item always does, an enforced item with cost > 0 when it is allowed.
inline bool ItemAllows(const CheckItem& item, const Decision& own) {
  return item.shadow || item.cost <= 0 || own.allowed;
}

// Whether the request is allowed, given each item's decision on its own: every item
// allows (ItemAllows).
bool MultiAllows(std::span<const CheckItem> items, std::span<const Decision> own);

// Fills binding, retry_after, denied_by and would_deny of `decision`, whose `allowed` and
// final `items` are set.
void Summarize(std::span<const CheckItem> items, MultiDecision& decision);

// The decision of an item the store was not asked about (MultiDecision::unknown): it
// reads as allowed, with remaining 0.
inline Decision NotConsulted(const CheckItem& item) {
  Decision d;
  d.allowed = true;
  d.limit = item.policy.limit;
  return d;
}

}  // namespace floodgate::core

#pragma once

// How a multi-decision's item decisions combine: the one definition every store uses.
//
// docs/multi.md, "Decision" and "The answer", is the contract. The scripts in lua/ implement only
// the first rule (what is consumed); the combination is computed here from what they return.

#include <floodgate/multi.h>

#include <cstdint>
#include <optional>
#include <span>

#include "core/algorithms.h"

namespace floodgate::core {

// Whether an item lets the request through, given its decision on its own: a shadow or a
// cost-0 item always does, an enforced item with cost > 0 when it is allowed.
inline bool ItemAllows(const CheckItem& item, const Decision& own) {
  return item.shadow || item.cost <= 0 || own.allowed;
}

// Whether the request is allowed, given each item's decision on its own: every item
// allows (ItemAllows).
bool MultiAllows(std::span<const CheckItem> items, std::span<const Decision> own);

// Fills binding, retry_after, delay, denied_by and would_deny of `decision`, whose `allowed`
// and final `items` are set.
void Summarize(std::span<const CheckItem> items, MultiDecision& decision);

// The decision of an item the store was not asked about (MultiDecision::unknown): it
// reads as allowed, with remaining 0.
inline Decision NotConsulted(const CheckItem& item) {
  Decision d;
  d.allowed = true;
  d.limit = item.policy.limit;
  return d;
}

// Multi-decisions under delay= (docs/algorithms.md, "Waiting", the multi-decisions rule),
// in three steps every store takes: each item decided on its own at now, writing nothing
// (its own decision d_i); StartOf those; then the items Redecide names decided again in
// the window it gives, the rest keeping d_i as a multi-decision without delay= keeps it
// (docs/multi.md). lua/batch.lua's wait_group takes the same steps.

// The items that set the request's start: those that can deny it (enforced, cost > 0). A
// shadow item or a peek never holds the request back: it is decided as on its own.
inline bool Schedules(const CheckItem& item) { return !item.shadow && item.cost > 0; }

// Whether the request waits: some item that schedules has delay=. Else every item is
// decided at now, as docs/multi.md says.
bool Waits(std::span<const CheckItem> items);

// s_i - now for an item from its own decision at now: 0 when admitted at once, its delay
// when admitted later, retry_after + D_i when denied; -1 when it can never fit.
std::int64_t OwnWait(const CheckItem& item, const Decision& own);

// The request's start: s = max s_i over the items that schedule, as a wait from now,
// and the most it may wait, min D_i (0 for an item without delay=).
struct MultiStart {
  std::int64_t wait = 0;  // s - now; -1 when some item can never fit
  std::int64_t allowance = 0;
  bool Admits() const { return wait >= 0 && wait <= allowance; }
};
MultiStart StartOf(std::span<const CheckItem> items, std::span<const Decision> own);

// The window item `item` is decided again in, or nothing when its own decision stands.
// Admitted with a wait: every item that schedules (each has delay=) is charged at s, in
// {s, allowance}. Denied: an item that schedules and cannot start within the allowance
// answers its denial by it, in {now, allowance} (retry_after = s_i - now - allowance),
// when it has delay= (without, its own denial says that already); every other item
// reports its peek or its own denial, as without delay=.
std::optional<DelayWindow> Redecide(const CheckItem& item, const Decision& own,
                                    const MultiStart& start, std::int64_t now);

}  // namespace floodgate::core

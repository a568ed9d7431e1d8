#pragma once

// The Redis store's currency: an item, a unit (one part of a script call) and its result.

#include <absl/container/inlined_vector.h>
#include <absl/functional/any_invocable.h>
#include <absl/status/statusor.h>
#include <floodgate/decision.h>
#include <floodgate/policy.h>
#include <floodgate/store.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/state_kind.h"

namespace floodgate::redis {

using Steady = std::chrono::steady_clock;
struct Node;

// One key of a call: a single decision's, or one item of a multi-decision.
struct Item {
  std::string redis_key;  // <prefix><tag>:<key>
  std::size_t key_at;     // where the caller's key starts in redis_key (for on_error=local)
  Policy policy;
  std::int64_t cost;
  core::StateKind kind;
  bool shadow = false;
  // With tz: what the scripts get for the period, the calendar bounds around the
  // decision's now (CalendarArgument); empty otherwise.
  std::string calendar;
};

// The period argument of a calendar policy (tz=ZONE, docs/algorithms.md "Calendar
// windows"): "c<first>:<s0>:...:<s4>", the ordinal of the window before the one holding
// `now_us` (or this host's clock when not given) and the starts of five windows from it.
// Lua has no zone database, so the bounds come from here (abseil), while the script still
// chooses the window by its own clock among them (lua/common.lua calendar_window): a
// server clock within a day of this host's always finds it. Empty without tz, so the
// policies without one send exactly what they did.
std::string CalendarArgument(const Policy& policy, std::optional<std::int64_t> now_us);

// What lua/batch.lua does with a group of items (docs/multi.md): a single decision is no
// group; kAll decides a multi-decision's items all or nothing, kDry decides them and
// consumes nothing, kRelease gives back what an earlier kAll consumed. kReserve and
// kSettle are lua/reservation.lua's operations (docs/reservations.md), one item each,
// answered like a single decision.
enum class UnitMode : std::uint8_t { kSingle, kAll, kDry, kRelease, kReserve, kSettle };

// A group's answer: its items' decisions, and the server time the script read (0: none).
struct UnitResult {
  std::vector<Decision> items;
  std::int64_t clock_us = 0;
};
using UnitCallback = absl::AnyInvocable<void(absl::StatusOr<UnitResult>)>;

// What goes through Redis as one unit: a single decision, a reservation's operation, or a
// group of a multi-decision's items on one slot, which a call never splits. The fields
// only one kind of unit uses are grouped (hold, group); route is where it travels.
// Touched only on the I/O thread once queued.
struct Unit {
  // kReserve / kSettle (docs/reservations.md). kReserve: the record's key (the item's is
  // the limit's) and the hold. kSettle: the item's key is the record's, its cost the
  // actual. A lease keeps no record (lua/concurrency.lua): its acquire (kReserve) and
  // release (kSettle) name the concurrency key as the item's, and `lease` holds the
  // lease's random part or its member; the reply gives an admitted acquire's time.
  struct Hold {
    std::string record_key;
    std::string lease;
    std::int64_t acquired_at = 0;
    std::int64_t hold_us = 0;
    // kReserve: a take (lua/take.lua) of up to the item's cost, for hold_us; the reply's
    // acquire time is then the units leased.
    bool take = false;
  };
  // kAll / kDry / kRelease: a multi-decision's items on one slot (docs/multi.md).
  struct Group {
    std::int64_t release_at = 0;  // kRelease: when the items were admitted
    // kAll: the group is its whole multi-decision (one slot), so nothing will be released
    // later and the server clock it decided at is not needed.
    bool whole = false;
    UnitCallback done;
  };
  // Where the unit goes and has been.
  struct Route {
    int slot = 0;                 // Redis Cluster: the items' slot
    Node* node = nullptr;         // where it was sent (whose breaker its outcome feeds)
    Node* admitted_by = nullptr;  // the node whose breaker let it through (retries skip it)
    int redirects = 0;            // MOVED / ASK / TRYAGAIN followed so far
    bool alone = false;           // sent in a call of its own (after TRYAGAIN on a batch)
    bool by_slot = false;         // batched within its slot only (a node's batch refused it)
  };

  absl::InlinedVector<Item, 1> items;  // kSingle, kReserve, kSettle: exactly one
  UnitMode mode = UnitMode::kSingle;
  std::optional<std::int64_t> now_us;
  Steady::time_point deadline;
  DecisionCallback done;  // kSingle, kReserve, kSettle
  bool answered = false;
  Hold hold;
  Group group;
  Route route;

  const Item& item() const { return items.front(); }
  // Decided by the algorithm's own script when alone in a call: a single decision, or a
  // whole multi-decision of one item, which is that item's single decision (docs/multi.md),
  // its shadow flag aside (the caller applies it).
  bool single() const {
    return mode == UnitMode::kSingle ||
           (mode == UnitMode::kAll && group.whole && items.size() == 1);
  }
  bool reservation() const { return mode == UnitMode::kReserve || mode == UnitMode::kSettle; }
  // Answered through group.done (a group), else through done.
  bool grouped() const { return mode != UnitMode::kSingle && !reservation(); }
};
using UnitPtr = std::shared_ptr<Unit>;

// Where a caller's key lives in Redis: <prefix><tag>:<key>.
inline std::string RedisKey(std::string_view prefix, core::StateKind kind, std::string_view key) {
  std::string redis_key(prefix);
  redis_key.append(core::KeyTag(kind)).append(":").append(key);
  return redis_key;
}

}  // namespace floodgate::redis

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
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "core/state_kind.h"

namespace floodgate::redis {

using Steady = std::chrono::steady_clock;
class Node;

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

// A group's answer: its items' decisions, and the server time the script read (0: none).
struct UnitResult {
  std::vector<Decision> items;
  std::int64_t clock_us = 0;
};
using UnitCallback = absl::AnyInvocable<void(absl::StatusOr<UnitResult>)>;
// A decision and lua/reservation.lua's last integer of the operation's answer: an
// acquire's time (LeaseAcquire), or the units leased (Take).
using HeldCallback = absl::AnyInvocable<void(absl::StatusOr<Decision>, std::int64_t)>;

// What a unit asks of Redis, one type per operation: what only it needs, and the callback
// that answers it. Encode (encode.cc) sends each in its script's layout (script_layout.h).
//
// A single decision: its algorithm's script alone in a call, else lua/batch.lua.
struct Decide {
  DecisionCallback done;
};
// envoyproxy/ratelimit's counter (Store::Count, lua/upstream.lua): the item's key is upstream's
// as it is (no prefix, no tag), its cost the hits; a ttl_s of 0 only reads. Counters share a
// call with counters only, of one slot. Answered with the count after, or on_error's count.
struct Count {
  std::int64_t ttl_s = 0;
  std::int64_t count = 0;  // from the reply, or on_error's (Outcomes)
  CountCallback done;
};
// Operating a key (Store::Operate, lua/operate.lua): reset, refund or penalize the item's key,
// always in a call of its own; answered with the key's peek after it, never by on_error.
struct Operate {
  KeyOperation operation = KeyOperation::kReset;
  std::int64_t units = 0;
  DecisionCallback done;
};
// A multi-decision's items on one slot, a group of lua/batch.lua (docs/multi.md): decided
// all or nothing; decided with nothing consumed; or given back after a later slot denied
// (what an earlier MultiAll consumed, admitted at `admitted_at`).
struct MultiAll {
  // The group is its whole multi-decision (one slot), so nothing will be released later
  // and the server clock it decided at is not needed.
  bool whole = false;
  UnitCallback done;
};
struct MultiDry {
  UnitCallback done;
};
struct MultiRelease {
  std::int64_t admitted_at = 0;
  UnitCallback done;
};
// lua/reservation.lua's operations (docs/reservations.md, docs/leases.md), one item each,
// answered like a single decision. Reserve: the item's key is the limit's, its cost the
// estimate; the record is written at `record_key` for `hold_us`.
struct Reserve {
  std::string record_key;
  std::int64_t hold_us = 0;
  DecisionCallback done;
};
// A take (lua/take.lua, docs/prefetch.md) of up to the item's cost, for `lifetime_us`,
// with a record as a reserve's; the reply's last integer is the units leased.
struct Take {
  std::string record_key;
  std::int64_t lifetime_us = 0;
  std::int64_t units = 0;  // from the reply
  HeldCallback done;
};
// Settles a reservation: the item's key is the record's, its cost the actual.
struct Settle {
  DecisionCallback done;
};
// A concurrency limit keeps no record (lua/concurrency.lua): an acquire and a release name
// the concurrency key as the item's; the acquire's lease is `random` (its member's random
// part), and the reply's last integer is an admitted acquire's time. The release names
// the lease's member; its cost is the actual.
struct LeaseAcquire {
  std::string random;
  std::int64_t acquired_at = 0;  // from the reply
  HeldCallback done;
};
struct LeaseRelease {
  std::string member;
  DecisionCallback done;
};
using Operation = std::variant<Decide, Count, Operate, MultiAll, MultiDry, MultiRelease, Reserve,
                               Take, Settle, LeaseAcquire, LeaseRelease>;

// The place of operation T in Operation.
template <class T, class... Ts>
constexpr std::size_t IndexIn(const std::variant<Ts...>*) {
  std::size_t i = 0;
  (void)((std::is_same_v<T, Ts> || (++i, false)) || ...);
  return i;
}
template <class T>
inline constexpr std::size_t kIndexOf = IndexIn<T>(static_cast<const Operation*>(nullptr));

// The scripts a unit may go by, so the units that may share a call: decisions (an algorithm's
// script, lua/batch.lua, lua/node_batch.lua), counters (lua/upstream.lua), reservations
// (lua/reservation.lua); an operation (lua/operate.lua) shares its call with none.
enum class Family : std::uint8_t { kDecision, kCounter, kReservation, kOperation };

// What goes through Redis as one unit: its operation, its items (one, or a group of a
// multi-decision's items on one slot, which a call never splits) and where it travels.
// Touched only on the I/O thread once queued.
struct Unit {
  // Where the unit goes and has been.
  struct Route {
    int slot = 0;                 // Redis Cluster: the items' slot
    Node* node = nullptr;         // where it was sent (whose breaker its outcome feeds)
    Node* admitted_by = nullptr;  // the node whose breaker let it through (retries skip it)
    int redirects = 0;            // MOVED / ASK / TRYAGAIN followed so far
    bool alone = false;           // sent in a call of its own (after TRYAGAIN on a batch)
    bool by_slot = false;         // batched within its slot only (a node's batch refused it)
  };

  absl::InlinedVector<Item, 1> items;  // one, but for a multi-decision's group
  Operation op;
  std::optional<std::int64_t> now_us;
  Steady::time_point deadline;
  bool answered = false;
  Route route;

  const Item& item() const { return items.front(); }
  template <class T>
  bool is() const {
    return std::holds_alternative<T>(op);
  }
  // Decided by the algorithm's own script when alone in a call: a single decision, or a
  // whole multi-decision of one item, which is that item's single decision (docs/multi.md),
  // its shadow flag aside (the caller applies it).
  bool single() const {
    if (is<Decide>()) return true;
    const auto* all = std::get_if<MultiAll>(&op);
    return all != nullptr && all->whole && items.size() == 1;
  }
  // A multi-decision's group, answered through a UnitCallback.
  bool grouped() const {
    return op.index() >= kIndexOf<MultiAll> && op.index() <= kIndexOf<MultiRelease>;
  }
  // Sent by lua/reservation.lua: the operations from Reserve on.
  bool reservation() const { return op.index() >= kIndexOf<Reserve>; }
  bool counts() const { return is<Count>(); }
  bool operates() const { return is<Operate>(); }
  Family family() const {
    return reservation() ? Family::kReservation
           : counts()    ? Family::kCounter
           : operates()  ? Family::kOperation
                         : Family::kDecision;
  }
  // Settles what an earlier operation holds (never decided by on_error: outcomes.h).
  bool settles() const { return is<Settle>() || is<LeaseRelease>(); }

  // lua/reservation.lua's last integer of this operation's answer (see HeldCallback).
  void Held(std::int64_t value) {
    if (auto* take = std::get_if<Take>(&op)) take->units = value;
    if (auto* acquire = std::get_if<LeaseAcquire>(&op)) acquire->acquired_at = value;
  }

  // Calls the operation's callback with a decision, or a group's with the error `d` holds
  // (a group's result comes through AnswerGroup).
  void Answer(absl::StatusOr<Decision> d) {
    std::visit(
        [&d](auto& o) {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, Take>) {
            o.done(std::move(d), o.units);
          } else if constexpr (std::is_same_v<T, Count>) {
            if (!d.ok()) return o.done(d.status());
            o.done(CountAnswer{o.count, d->degraded});
          } else if constexpr (std::is_same_v<T, LeaseAcquire>) {
            o.done(std::move(d), o.acquired_at);
          } else if constexpr (std::is_same_v<decltype(o.done), UnitCallback>) {
            o.done(d.ok() ? absl::InternalError("a group answered as one decision") : d.status());
          } else {
            o.done(std::move(d));
          }
        },
        op);
  }
  // A group's result, or its failure.
  void AnswerGroup(absl::StatusOr<UnitResult> result) {
    std::visit(
        [&result](auto& o) {
          if constexpr (std::is_same_v<decltype(o.done), UnitCallback>) {
            o.done(std::move(result));
          }
        },
        op);
  }
};
using UnitPtr = std::shared_ptr<Unit>;

// Where a caller's key lives in Redis: <prefix><tag>:<key>.
inline std::string RedisKey(std::string_view prefix, core::StateKind kind, std::string_view key) {
  std::string redis_key(prefix);
  redis_key.append(core::KeyTag(kind)).append(":").append(key);
  return redis_key;
}

}  // namespace floodgate::redis

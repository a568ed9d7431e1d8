// Pure: a chunk of units -> one EVALSHA/EVAL call in the single, batch, node or reservation layout.
#include "store/redis/encode.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <string_view>
#include <variant>
#include <vector>

#include "core/calendar.h"
#include "store/redis/resp.h"
#include "store/redis/script_layout.h"

namespace floodgate::redis {

namespace {

// The distinct policies of a chunk's items (a settle's record holds its own: it names
// none), and each item's policy number among them (1-based; 0 for a settle).
std::vector<const Item*> DistinctPolicies(std::span<const UnitPtr> chunk,
                                          std::vector<std::size_t>& policy_of) {
  std::vector<const Item*> policies;
  for (const auto& p : chunk) {
    for (const Item& item : p->items) {
      if (p->settles()) {
        policy_of.push_back(0);
        continue;
      }
      std::size_t j = 0;
      // Calendar bounds depend on each decision's now: equal ones only share an entry.
      while (j < policies.size() &&
             !(policies[j]->kind == item.kind && policies[j]->policy == item.policy &&
               policies[j]->calendar == item.calendar)) {
        ++j;
      }
      if (j == policies.size()) policies.push_back(&item);
      policy_of.push_back(j + 1);
    }
  }
  return policies;
}

// lua/batch.lua lists a group (5 arguments, checked one by one: with its deferred
// writes, Redis spent more on a listed group of one item than on the item) unless it
// is the common kind, all or nothing without shadows: such a group's items after the
// first join it by a '+' on their policy number, and a group of one is simply the
// item's own decision (docs/multi.md: a multi-decision of one item is the single one;
// a shadow changes only what the caller makes of it).
bool Joined(const Unit& p) {
  return p.is<MultiAll>() &&
         (p.items.size() == 1 || std::none_of(p.items.begin(), p.items.end(),
                                              [](const Item& item) { return item.shadow; }));
}
bool Listed(const Unit& p) { return p.grouped() && !Joined(p); }

// A reserve's or a take's record: a KEY after the limit's.
const std::string* RecordKeyOf(const Unit& p) {
  if (const auto* reserve = std::get_if<Reserve>(&p.op)) return &reserve->record_key;
  if (const auto* take = std::get_if<Take>(&p.op)) return &take->record_key;
  return nullptr;
}

// Calls `f` with each of a variant's alternatives' own overload.
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
// clang before 17 deduces no aggregate's template arguments (P1816) without a guide.
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// Units of several slots (a cluster node's batch, lua/node_batch.lua).
bool AcrossSlots(std::span<const UnitPtr> chunk) {
  return std::any_of(chunk.begin(), chunk.end(),
                     [&](const UnitPtr& p) { return p->route.slot != chunk[0]->route.slot; });
}

}  // namespace

std::string CalendarArgument(const Policy& policy, std::optional<std::int64_t> now_us) {
  if (policy.calendar == Calendar::kNone) return {};
  const std::int64_t now =
      now_us ? *now_us
             : std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  const core::CalendarBounds bounds = core::CalendarBoundsAround(core::CalendarOf(policy), now);
  return fmt::format("c{}:{}", bounds.first, fmt::join(bounds.starts, ":"));
}

EncodedCall Encode(std::span<const UnitPtr> chunk, const Scripts& scripts, ScriptForm form,
                   Asking asking) {
  const bool reservations = chunk[0]->reservation();
  const bool counters = chunk[0]->counts();
  const bool operation = chunk[0]->operates();
  const bool single = SingleCall(chunk) || operation;
  const bool across_slots = !reservations && !counters && !single && AcrossSlots(chunk);
  const ScriptId id = reservations   ? ScriptId::kReservation
                      : counters     ? ScriptId::kUpstream
                      : operation    ? ScriptId::kOperate
                      : single       ? SingleScriptFor(chunk[0]->item().kind)
                      : across_slots ? ScriptId::kNodeBatch
                                     : ScriptId::kBatch;
  std::size_t keys = 0, groups = 0;
  for (const auto& p : chunk) {
    keys += p->items.size() + (RecordKeyOf(*p) != nullptr);
    groups += Listed(*p);
  }
  // Decimal arguments, kept alive until the command is formatted (the vector is sized
  // up front, so the views into it stay valid).
  std::vector<std::string> numbers;
  // Per key at most a policy's and a decision's (a reserve's 8 over its 2 keys), per
  // group its own and the mode's place, and a few.
  numbers.reserve(4 + keys * (layout::kPolicy.size() + layout::kDecision.size()) +
                  groups * (layout::kGroup.size() + 1));
  const auto number = [&numbers](std::string text) -> std::string_view {
    return numbers.emplace_back(std::move(text));
  };
  const auto now_arg = [](const Unit& p) {
    return p.now_us ? std::to_string(*p.now_us) : std::string();
  };
  // P in µs, or a calendar policy's bounds (CalendarArgument).
  const auto period_arg = [&number](const Item& item) -> std::string_view {
    if (!item.calendar.empty()) return item.calendar;
    return number(std::to_string(item.policy.period.count()));
  };
  // A policy's kind, with its block or its delay when it has one (lua/common.lua
  // FG.split_kind; Policy::Validate never lets a policy have both).
  const auto kind_arg = [&number](const Item& item) -> std::string_view {
    if (item.policy.delay.count() != 0) {
      return number(fmt::format("{}+{}", core::KeyTag(item.kind), item.policy.delay.count()));
    }
    if (item.policy.block.count() == 0) return core::KeyTag(item.kind);
    return number(fmt::format("{}/{}", core::KeyTag(item.kind), item.policy.block.count()));
  };
  std::vector<std::string_view> args;
  args.reserve(10 + keys * (1 + layout::kPolicy.size() + layout::kDecision.size()) +
               groups * layout::kGroup.size());
  const bool as_eval = form == ScriptForm::kBody;
  args.push_back(as_eval ? "EVAL" : "EVALSHA");
  args.push_back(as_eval ? scripts.body(id) : scripts.sha(id));
  if (across_slots) {  // lua/node_batch.lua: the first key routes; layout::kNodeBatch
    args.push_back("1");
    args.push_back(chunk[0]->item().redis_key);
    args.push_back(number(std::to_string(keys)));
    std::string marks;
    marks.reserve(keys);
    for (std::size_t u = 0; u < chunk.size(); ++u) {
      const bool new_slot = u == 0 || chunk[u]->route.slot != chunk[u - 1]->route.slot;
      for (std::size_t i = 0; i < chunk[u]->items.size(); ++i) {
        marks.push_back(new_slot && i == 0 ? '1' : '0');
      }
    }
    args.push_back(number(std::move(marks)));
    for (const auto& p : chunk) {
      for (const Item& item : p->items) {
        if (&item != &chunk[0]->item()) args.push_back(item.redis_key);
      }
    }
  } else {
    args.push_back(number(std::to_string(keys)));
    for (const auto& p : chunk) {
      for (const Item& item : p->items) args.push_back(item.redis_key);
      if (const std::string* record = RecordKeyOf(*p)) args.push_back(*record);
    }
  }
  // The distinct policies of a batch or of reservations, sent once: p, then layout::kPolicy
  // each.
  const auto append_policies = [&](const std::vector<const Item*>& policies) {
    args.push_back(number(std::to_string(policies.size())));
    for (const Item* item : policies) {
      args.push_back(kind_arg(*item));
      args.push_back(number(std::to_string(item->policy.limit)));
      args.push_back(period_arg(*item));
      args.push_back(number(std::to_string(item->policy.capacity())));
    }
  };
  if (counters) {  // lua/upstream.lua: layout::kCounter per key
    for (const auto& p : chunk) {
      const std::int64_t ttl = std::get<Count>(p->op).ttl_s;
      args.push_back(number(std::to_string(p->item().cost)));
      args.push_back(ttl > 0 ? number(std::to_string(ttl)) : std::string_view());
    }
  } else if (reservations) {  // lua/reservation.lua: the distinct policies once, then each operation
    std::vector<std::size_t> policy_of;
    append_policies(DistinctPolicies(chunk, policy_of));
    args.push_back(number(std::to_string(chunk.size())));
    std::size_t k = 0;
    for (const auto& p : chunk) {
      const Item& item = p->item();
      const std::size_t policy_number = policy_of[k++];
      const auto policy = [&] { return number(std::to_string(policy_number)); };
      // An acquire or release at the server clock (and a release at 0) has a short form
      // (layout::kAcquireNow, kReleaseNow): each argument costs Redis ~1,000 instructions.
      std::visit(
          Overloaded{
              [&](const Reserve& reserve) {  // layout::kReserve
                args.insert(args.end(),
                            {"r", policy(), number(now_arg(*p)), number(std::to_string(item.cost)),
                             number(std::to_string(reserve.hold_us))});
              },
              [&](const Take& take) {  // layout::kTake: a reserve's arguments
                args.insert(args.end(),
                            {"t", policy(), number(now_arg(*p)), number(std::to_string(item.cost)),
                             number(std::to_string(take.lifetime_us))});
              },
              [&](const Settle&) {  // layout::kSettle
                args.insert(args.end(),
                            {"s", number(now_arg(*p)), number(std::to_string(item.cost))});
              },
              [&](const LeaseAcquire& acquire) {  // layout::kAcquire, kAcquireNow
                if (p->now_us) {
                  args.insert(args.end(), {"A", policy(), number(now_arg(*p)), acquire.random});
                } else {
                  args.insert(args.end(), {"a", policy(), acquire.random});
                }
              },
              [&](const LeaseRelease& release) {  // layout::kRelease, kReleaseNow
                if (p->now_us || item.cost != 0) {
                  args.insert(args.end(), {"L", number(now_arg(*p)),
                                           number(std::to_string(item.cost)), release.member});
                } else {
                  args.insert(args.end(), {"l", release.member});
                }
              },
              [](const auto&) {},  // not a reservation: never in this chunk
          },
          p->op);
    }
  } else if (single) {  // lua/single.lua: layout::kSingle; lua/operate.lua: layout::kOperate
    const Unit& p = *chunk[0];
    const Item& item = p.item();
    args.push_back(kind_arg(item));
    args.push_back(number(now_arg(p)));
    args.push_back(number(std::to_string(item.policy.limit)));
    args.push_back(period_arg(item));
    args.push_back(number(std::to_string(item.policy.capacity())));
    if (const auto* operate = std::get_if<Operate>(&p.op)) {
      args.push_back(KeyOperationName(operate->operation));
      args.push_back(number(std::to_string(operate->units)));
    } else {
      args.push_back(number(std::to_string(item.cost)));
    }
  } else {  // lua/batch.lua: the distinct policies once, the groups, then each item
    std::vector<std::size_t> policy_of;
    append_policies(DistinctPolicies(chunk, policy_of));
    args.push_back(number(std::to_string(groups)));
    std::size_t first = 1;
    for (const auto& p : chunk) {
      if (Listed(*p)) {  // layout::kGroup
        unsigned mask = 0;
        for (std::size_t i = 0; i < p->items.size(); ++i) mask |= p->items[i].shadow << i;
        args.push_back(number(std::to_string(first)));
        args.push_back(number(std::to_string(p->items.size())));
        const auto* release = std::get_if<MultiRelease>(&p->op);
        args.push_back(p->is<MultiAll>() ? "all" : p->is<MultiDry>() ? "dry" : "release");
        args.push_back(number(std::to_string(mask)));
        args.push_back(release != nullptr ? number(std::to_string(release->admitted_at))
                                          : std::string_view());
      }
      first += p->items.size();
    }
    std::size_t k = 0;
    for (const auto& p : chunk) {  // layout::kDecision
      const std::string_view now = number(now_arg(*p));
      const bool joins = Joined(*p);
      for (std::size_t i = 0; i < p->items.size(); ++i) {
        const std::string policy = std::to_string(policy_of[k++]);
        args.push_back(number(joins && i > 0 ? "+" + policy : policy));
        args.push_back(now);
        args.push_back(number(std::to_string(p->items[i].cost)));
      }
    }
  }
  EncodedCall call;
  if (asking == Asking::kYes) AppendCommand(call.command, {"ASKING"});
  call.asking_bytes = call.command.size();
  AppendCommand(call.command, args);
  call.keys = keys;
  call.across_slots = across_slots;
  return call;
}

}  // namespace floodgate::redis

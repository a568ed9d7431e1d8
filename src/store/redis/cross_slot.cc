// Multi-decisions across Cluster slots (docs/multi.md): reserve in order, unwind, release.
#include "store/redis/cross_slot.h"

#include <algorithm>
#include <map>

#include "core/multi.h"

namespace floodgate::redis {

void CrossSlot::Submit(const MultiRequest& request, MultiCallback done) {
  auto m = std::make_shared<MultiState>();
  const std::size_t n = request.items.size();
  std::size_t name_bytes = 0;
  for (const CheckItem& item : request.items) name_bytes += item.name.size();
  // The items' views point into these: reserved up front, nothing is ever moved.
  m->names.reserve(name_bytes);
  m->redis_keys.reserve(n);
  m->items.reserve(n);
  for (const CheckItem& item : request.items) {
    const std::string& redis_key =
        m->redis_keys.emplace_back(RedisKey(options_.prefix, core::KindOf(item.policy), item.key));
    CheckItem& copy = m->items.emplace_back(item);
    // The caller's key is the end of the Redis key (<prefix><tag>:<key>).
    copy.key = std::string_view(redis_key).substr(redis_key.size() - item.key.size());
    copy.name = std::string_view(m->names.data() + m->names.size(), item.name.size());
    m->names.append(item.name);
  }
  if (request.now) m->now_us = request.now->time_since_epoch().count();
  const Steady::time_point now = Steady::now();
  m->deadline = now + options_.timeout;
  m->done = std::move(done);
  m->decisions.resize(n);
  // The items by slot, ascending (the topology's: every key in one on a single server).
  absl::InlinedVector<int, 4> slot_of(n);
  for (std::size_t i = 0; i < n; ++i) slot_of[i] = dispatcher_.SlotOf(m->redis_keys[i]);
  const bool one_slot =
      std::all_of(slot_of.begin(), slot_of.end(), [&](int slot) { return slot == slot_of[0]; });
  if (!one_slot && core::Waits(m->items)) {
    // Under delay= every item is charged at the latest item's start, known only once every
    // slot was asked: reserving slot by slot would charge the earlier slots too early.
    return m->done(absl::InvalidArgumentError(
        "a multi-decision under delay= decides its keys in one script call: give them one "
        "Cluster slot with a {hash tag} (the service's keys share the client's)"));
  }
  ++counters_.multi;
  if (!request.now && options_.denial_cache_min.count() > 0 && AnswerFromDenials(*m, now)) {
    return;
  }
  if (one_slot) {
    Indexes& all = m->slots.emplace_back(n);
    for (std::size_t i = 0; i < n; ++i) all[i] = i;
  } else {
    std::map<int, Indexes> by_slot;
    for (std::size_t i = 0; i < n; ++i) by_slot[slot_of[i]].push_back(i);
    for (auto& [slot, items] : by_slot) m->slots.push_back(std::move(items));
    ++counters_.cross_slot;
  }
  ReserveNext(std::move(m));
}

// A denial cached for an enforced item denies the whole request without a round trip
// (docs/multi.md, "Failures"); the items not asked are reported unknown.
bool CrossSlot::AnswerFromDenials(MultiState& m, Steady::time_point now) {
  MultiDecision answer;
  bool hit = false;
  for (std::size_t i = 0; i < m.items.size(); ++i) {
    const CheckItem& item = m.items[i];
    std::optional<Decision> cached;
    if (!item.shadow && item.cost > 0) {
      cached = outcomes_.CachedDenial(m.redis_keys[i], item.policy, item.cost, now);
    }
    if (cached) {
      answer.items.push_back(*cached);
      hit = true;
    } else {
      answer.items.push_back(core::NotConsulted(item));
      answer.unknown.push_back(i);
    }
  }
  if (!hit) return false;
  ++counters_.denial_cache_hits;
  answer.from_denial_cache = true;
  core::Summarize(m.items, answer);
  m.done(std::move(answer));
  return true;
}

UnitPtr CrossSlot::MakeUnit(const MultiState& m, const Indexes& indexes, Operation op,
                            Steady::time_point deadline) {
  auto unit = std::make_shared<Unit>();
  for (std::size_t i : indexes) {
    const CheckItem& item = m.items[i];
    const std::string& redis_key = m.redis_keys[i];
    unit->items.push_back(Item{redis_key, redis_key.size() - item.key.size(), item.policy,
                               item.cost, core::KindOf(item.policy), item.shadow,
                               CalendarArgument(item.policy, m.now_us)});
  }
  unit->op = std::move(op);
  unit->now_us = m.now_us;
  unit->deadline = deadline;
  return unit;
}

// Decides (and consumes, if they all allow) the items of the next slot, then the next.
void CrossSlot::ReserveNext(MultiPtr m) {
  if (m->next == m->slots.size()) return Finish(*m, /*allowed=*/true);
  MultiAll all;
  all.whole = m->slots.size() == 1;
  all.done = [this, m](absl::StatusOr<UnitResult> result) {
    if (!result.ok()) return Abort(m, result.status());
    const Indexes& indexes = m->slots[m->next];
    bool allowed = true;  // core::MultiAllows over this slot's items
    for (std::size_t k = 0; k < indexes.size(); ++k) {
      m->decisions[indexes[k]] = result->items[k];
      allowed = allowed && core::ItemAllows(m->items[indexes[k]], result->items[k]);
    }
    m->reserved_at.push_back(m->now_us.value_or(result->clock_us));
    if (allowed) {
      ++m->next;
      return ReserveNext(m);
    }
    Unwind(m);  // this slot denied and consumed nothing
  };
  auto unit = MakeUnit(*m, m->slots[m->next], std::move(all), m->deadline);
  dispatcher_.Dispatch(std::move(unit), Steady::now());
}

// A slot denied: the later slots are asked what they would say (nothing consumed), the
// earlier ones give their reservations back; each answers its items' peeks.
void CrossSlot::Unwind(MultiPtr m) {
  // Where a unit's answers go: its items' places in m, found by key.
  const auto answered = [&m](const Indexes& items) -> UnitCallback {
    Indexes indexes;
    for (std::size_t i : items) indexes.push_back(IndexOf(*m, m->redis_keys[i]));
    return [m, indexes](absl::StatusOr<UnitResult> result) {
      for (std::size_t k = 0; k < indexes.size(); ++k) {
        if (result.ok()) {
          m->decisions[indexes[k]] = result->items[k];
        } else {
          m->unknown.push_back(indexes[k]);
          m->decisions[indexes[k]] = core::NotConsulted(m->items[indexes[k]]);
          m->degraded = true;
        }
      }
      if (--m->outstanding == 0) Finish(*m, /*allowed=*/false);
    };
  };
  std::vector<UnitPtr> units;
  for (std::size_t s = m->next + 1; s < m->slots.size(); ++s) {
    units.push_back(MakeUnit(*m, m->slots[s], MultiDry{answered(m->slots[s])}, m->deadline));
  }
  for (UnitPtr& release : Releases(*m, answered)) units.push_back(std::move(release));
  m->outstanding = static_cast<int>(units.size());
  if (units.empty()) return Finish(*m, /*allowed=*/false);
  for (UnitPtr& unit : units) dispatcher_.Dispatch(std::move(unit), Steady::now());
}

// Release calls for what the reserved slots consumed: items that allowed with a cost,
// each call answered by `done(its items)`. They get a deadline of their own: a release
// must not be dropped for the request's.
template <class Done>
std::vector<UnitPtr> CrossSlot::Releases(const MultiState& m, const Done& done) {
  std::vector<UnitPtr> units;
  for (std::size_t s = 0; s < m.next; ++s) {
    Indexes consumed;
    for (std::size_t i : m.slots[s]) {
      if (m.decisions[i].allowed && m.items[i].cost > 0) consumed.push_back(i);
    }
    if (consumed.empty()) continue;
    units.push_back(MakeUnit(m, consumed, MultiRelease{m.reserved_at[s], done(consumed)},
                             Steady::now() + options_.timeout));
    ++counters_.releases;
  }
  return units;
}

std::size_t CrossSlot::IndexOf(const MultiState& m, std::string_view redis_key) {
  for (std::size_t i = 0; i < m.redis_keys.size(); ++i) {
    if (m.redis_keys[i] == redis_key) return i;
  }
  return 0;  // unreachable: every unit's item comes from m
}

void CrossSlot::Finish(MultiState& m, bool allowed) {
  MultiDecision answer;
  answer.allowed = allowed;
  answer.items = std::move(m.decisions);
  answer.unknown = std::move(m.unknown);
  std::sort(answer.unknown.begin(), answer.unknown.end());
  answer.degraded = m.degraded;
  core::Summarize(m.items, answer);
  m.done(std::move(answer));
}

// A call failed: what was reserved goes back (its answer is not awaited), and on_error
// answers for every item, as one multi-decision.
void CrossSlot::Abort(MultiPtr m, const absl::Status& status) {
  const auto counted = [this](const Indexes&) -> UnitCallback {
    return [this](absl::StatusOr<UnitResult> result) {
      if (!result.ok()) ++counters_.release_failures;
    };
  };
  for (UnitPtr& unit : Releases(*m, counted)) dispatcher_.Dispatch(std::move(unit), Steady::now());
  if (absl::IsCancelled(status)) return m->done(status);
  m->done(outcomes_.AnswerMulti(m->items, m->now_us));
}

}  // namespace floodgate::redis

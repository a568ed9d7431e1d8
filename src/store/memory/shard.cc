// A memory shard: keys decided under its lock, expiry sweeps, CLOCK eviction, reservations.

#include "store/memory/shard.h"

#include <absl/hash/hash.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include "common/strings.h"
#include "core/block.h"
#include "core/operate.h"

namespace floodgate::memory {

namespace {

// Entries the expiry sweep looks at per insert: reclamation outpaces growth, so expired
// keys never pile up while new keys keep arriving.
constexpr std::size_t kSweepPerInsert = 2;
// Entries the sweep looks at when an insert finds the shard full, before it evicts a
// live key: expired keys go first whenever one is this close to the sweep cursor.
constexpr std::size_t kSweepWhenFull = 64;
// An entry as max_bytes counts it: its 40 bytes and its index slot (a 4-byte position
// and a control byte, at SwissTable's load of at most 7/8, rounded up).
constexpr std::size_t kEntryBytes = sizeof(Entry) + 8;

std::uint32_t SecondsFloor(std::int64_t us) {
  return static_cast<std::uint32_t>(
      std::min<std::int64_t>(us / 1'000'000, std::numeric_limits<std::uint32_t>::max()));
}

// Rounded up, so an entry is never reclaimed before its state is fresh.
std::uint32_t SecondsCeil(std::int64_t us) {
  return static_cast<std::uint32_t>(std::min<std::int64_t>(
      (us + 999'999) / 1'000'000, std::numeric_limits<std::uint32_t>::max()));
}

template <class S>
S& StateAs(Entry::State& state) {
  if constexpr (std::is_same_v<S, core::GcraState>) return state.gcra;
  if constexpr (std::is_same_v<S, core::SmoothBucketState>) return state.smooth;
  if constexpr (std::is_same_v<S, core::IntervalBucketState>) return state.interval;
  if constexpr (std::is_same_v<S, core::FixedWindowState>) return state.fixed;
  if constexpr (std::is_same_v<S, core::SlidingWindowState>) return state.sliding;
}

}  // namespace

std::size_t KeyHash(std::string_view key) { return absl::HashOf(ToAbsl(key)); }

Shard::Shard(std::size_t max_keys, std::size_t max_bytes, HoldBudget& holds,
             std::uint64_t number_prefix, std::uint64_t number_mask)
    : index_(0, IndexHash{&entries_}, IndexEq{&entries_}),
      max_keys_(max_keys),
      max_bytes_(max_bytes),
      holds_(holds),
      number_prefix_(number_prefix),
      number_mask_(number_mask) {}

namespace {

// A core function as a type of its own, so that the call through it is direct and the
// header-defined algorithm can inline into the shard's decision (a function pointer
// handed to the visitor was called indirectly, paying a call per decision).
template <auto kFunction>
struct CoreCall {
  template <class... Args>
  [[gnu::always_inline]] auto operator()(Args&&... args) const {
    return kFunction(std::forward<Args>(args)...);
  }
};

// Calls visit(std::type_identity<S>{}, decide) with the state type and the core function
// of a value-state kind (not the sliding log). Each algorithm writes its answer straight
// into the caller's Decision (see core/algorithms.h).
template <class Visit>
void VisitValueKind(core::StateKind kind, Visit&& visit) {
  switch (kind) {
    case core::StateKind::kGcra:
      return visit(std::type_identity<core::GcraState>{}, CoreCall<core::DecideGcra>{});
    case core::StateKind::kSmoothBucket:
      return visit(std::type_identity<core::SmoothBucketState>{},
                   CoreCall<core::DecideSmoothBucket>{});
    case core::StateKind::kIntervalBucket:
      return visit(std::type_identity<core::IntervalBucketState>{},
                   CoreCall<core::DecideIntervalBucket>{});
    case core::StateKind::kSlidingWindow:
      return visit(std::type_identity<core::SlidingWindowState>{},
                   CoreCall<core::DecideSlidingWindow>{});
    case core::StateKind::kFixedWindow:
      return visit(std::type_identity<core::FixedWindowState>{},
                   CoreCall<core::DecideFixedWindow>{});
    case core::StateKind::kSlidingLog:
    case core::StateKind::kConcurrency:
      return;  // not a value state (core::KeepsLog)
  }
}

}  // namespace

// Inlined where it is called, and flattened (the index's find and the key comparison
// inline into it): left to itself the compiler called both out of line, paying two calls
// and their register saves on every lookup.
[[gnu::flatten, gnu::always_inline]] inline Shard::Found Shard::Find(const Probe& probe,
                                                                    std::int64_t now_us) {
  Found found;
  if (auto it = index_.find(probe); it != index_.end()) {
    found.slot = *it;
    found.entry = &entries_[found.slot];
    found.live = !found.entry->expired(SecondsFloor(now_us));
  }
  return found;
}

// Flattened: every decision's path (the lookup, the algorithm, the update of a known key)
// is one function without calls, ~60 instructions less than the calls the compiler left
// (callgrind). What a decision rarely does stays out of line: Insert and RemoveAt.
[[gnu::flatten]] void Shard::Decide(const Probe& probe, const Policy& policy, std::int64_t now_us,
                                    std::int64_t cost, Decision& decision) {
  std::lock_guard lock(mu_);
  if (policy.block.count() > 0) {
    const Plan plan = Evaluate(probe, policy, now_us, cost, decision);
    SaveBlock(probe, plan, now_us);
    return Commit(probe, plan, now_us);
  }
  const Found found = Find(probe, now_us);
  if (core::KeepsLog(probe.kind)) {
    return UpdateLog(probe, found, now_us, [&](core::SlidingLog& log) {
      return core::DecideSlidingLog(policy, log, now_us, cost, decision);
    });
  }
  VisitValueKind(probe.kind, [&]<class S>(std::type_identity<S>, auto decide) {
    DecideValue<S>(probe, found, now_us,
                   [&](const S* stored) { return decide(policy, stored, now_us, cost, decision); });
  });
}

Shard::Plan Shard::Evaluate(const Probe& probe, const Policy& policy, std::int64_t now_us,
                            std::int64_t cost, Decision& decision) {
  if (policy.block.count() > 0) {
    return EvaluateBlocked(Find(probe, now_us), probe.kind, policy, BlockedUntil(probe, now_us),
                           now_us, cost, decision);
  }
  return EvaluateFound(Find(probe, now_us), probe.kind, policy, now_us, cost, decision);
}

void Shard::Peek(const Probe& probe, const Plan& plan, const Policy& policy, std::int64_t now_us,
                 Decision& decision) {
  const Found found = plan.layout == layout_ ? plan.found : Find(probe, now_us);
  if (policy.block.count() > 0) {
    EvaluateBlocked(found, probe.kind, policy, plan.blocked_until, now_us, 0, decision);
    return;
  }
  EvaluateFound(found, probe.kind, policy, now_us, 0, decision);
}

Shard::Plan Shard::EvaluateBlocked(Found found, core::StateKind kind, const Policy& policy,
                                   std::int64_t blocked_until, std::int64_t now_us,
                                   std::int64_t cost, Decision& decision) {
  Plan plan;
  const core::BlockStep step = core::DecideWithBlock(
      policy, blocked_until, now_us, cost, decision, [&](std::int64_t c, Decision& d) {
        plan = EvaluateFound(found, kind, policy, now_us, c, d);
      });
  if (!step.charge) {
    plan.state.reset();
    plan.append = 0;
  }
  plan.blocked_until = step.blocked_until;
  plan.starts_block = step.started;
  return plan;
}

std::int64_t Shard::BlockedUntil(const Probe& probe, std::int64_t now_us) {
  if (blocks_ == 0) return 0;  // no lookup while nothing in the shard is blocked
  const Found found = Find(BlockProbe(probe), now_us);
  if (!found.live || found.entry->state().blocked_until <= now_us) return 0;
  found.entry->set_referenced(true);  // a blocked client keeps asking: not the one to evict
  return found.entry->state().blocked_until;
}

void Shard::SaveBlock(const Probe& probe, const Plan& plan, std::int64_t now_us) {
  if (!plan.starts_block) return;
  const Probe block = BlockProbe(probe);
  Entry::State state;
  state.blocked_until = plan.blocked_until;
  const Found found = Find(block, now_us);
  if (found.entry == nullptr) ++blocks_;
  Save(block, found, state, now_us, plan.blocked_until);
}

template <class LogFn, class ValueFn>
Shard::Plan Shard::PlanFrom(Found found, core::StateKind kind, std::int64_t now_us,
                            std::int64_t cost, const Decision& decision, LogFn decide_log,
                            ValueFn decide_value) {
  Plan plan;
  plan.found = found;
  plan.layout = layout_;
  if (core::KeepsLog(kind)) {
    core::SlidingLog scratch;
    core::SlidingLog& log = found.live ? *found.entry->state().log : scratch;
    plan.ttl_us = decide_log(log);
    if (found.live) CountLog(*found.entry);  // trimmed
    if (decision.allowed) plan.append = cost;
    plan.append_at = now_us + decision.delay.count();  // delay=: the run is stored at its start
    return plan;
  }
  VisitValueKind(kind, [&]<class S>(std::type_identity<S>, auto decide) {
    const core::Outcome<S> out =
        decide_value(found.live ? &StateAs<S>(found.entry->state()) : nullptr, decide);
    if (out.write) {
      Entry::State state;
      StateAs<S>(state) = *out.write;
      plan.state = state;
      plan.ttl_us = out.ttl_us;
    }
  });
  return plan;
}

Shard::Plan Shard::EvaluateFound(Found found, core::StateKind kind, const Policy& policy,
                                 std::int64_t now_us, std::int64_t cost, Decision& decision) {
  return PlanFrom(
      found, kind, now_us, cost, decision,
      [&](core::SlidingLog& log) {
        return core::DecideSlidingLog(policy, log, now_us, cost, decision, /*append=*/false);
      },
      [&]<class S>(const S* stored, auto decide) {
        return decide(policy, stored, now_us, cost, decision);
      });
}

Shard::Plan Shard::EvaluateInWindow(const Probe& probe, const Plan& own, const Policy& policy,
                                    std::int64_t now_us, std::int64_t cost,
                                    core::DelayWindow window, Decision& decision) {
  const Found found = own.layout == layout_ ? own.found : Find(probe, now_us);
  return PlanFrom(
      found, probe.kind, now_us, cost, decision,
      [&](core::SlidingLog& log) {
        return core::DelaySlidingLog(policy, log, now_us, cost, decision, /*append=*/false, window);
      },
      [&]<class S>(const S* stored, auto) {
        // The kinds that take delay= (Policy::Validate refuses it elsewhere).
        if constexpr (requires {
                        core::DecideInWindow(policy, stored, now_us, cost, decision, window);
                      }) {
          return core::DecideInWindow(policy, stored, now_us, cost, decision, window);
        } else {
          return core::Outcome<S>{};
        }
      });
}

void Shard::Commit(const Probe& probe, const Plan& plan, std::int64_t now_us) {
  const Found found = plan.layout == layout_ ? plan.found : Find(probe, now_us);
  // A run at its start (delay=), at now otherwise (CommitSlidingLog clamps to the newest).
  const std::int64_t run_at = std::max(now_us, plan.append_at);
  if (plan.append > 0) {
    if (found.live) {
      core::CommitSlidingLog(*found.entry->state().log, run_at, plan.append);
      found.entry->set_expires(SecondsCeil(now_us + plan.ttl_us));
      found.entry->set_referenced(true);
      CountLog(*found.entry);
      return FitBytes(SecondsFloor(now_us));
    }
    auto log = std::make_unique<core::SlidingLog>();
    core::CommitSlidingLog(*log, run_at, plan.append);
    Entry::State state;
    state.log = log.release();  // owned by the entry
    return Save(probe, found, state, now_us, now_us + plan.ttl_us);
  }
  if (!plan.state) return;
  if (plan.ttl_us > 0) return Save(probe, found, *plan.state, now_us, now_us + plan.ttl_us);
  Drop(found);  // the state is fresh again
}

template <class S, class DecideFn>
void Shard::DecideValue(const Probe& probe, Found found, std::int64_t now_us, DecideFn decide) {
  const core::Outcome<S> out = decide(found.live ? &StateAs<S>(found.entry->state()) : nullptr);
  if (out.write && out.ttl_us > 0) {
    Entry::State state;
    StateAs<S>(state) = *out.write;
    Save(probe, found, state, now_us, now_us + out.ttl_us);
  } else if (out.write || !found.live) {
    Drop(found);  // the state is fresh again (or had expired): nothing worth keeping
  } else {
    found.entry->set_referenced(true);
  }
}

template <class UpdateFn>
void Shard::UpdateLog(const Probe& probe, Found found, std::int64_t now_us, UpdateFn update) {
  core::SlidingLog scratch;
  core::SlidingLog& log = found.live ? *found.entry->state().log : scratch;
  const std::int64_t ttl_us = update(log);
  if (found.live) CountLog(*found.entry);
  if (ttl_us <= 0 || (!found.live && log.empty())) {
    Drop(found);
  } else if (found.live) {
    found.entry->set_expires(SecondsCeil(now_us + ttl_us));
    found.entry->set_referenced(true);
    FitBytes(SecondsFloor(now_us));
  } else {
    Entry::State state;
    state.log = std::make_unique<core::SlidingLog>(std::move(log)).release();  // owned by Entry
    Save(probe, found, state, now_us, now_us + ttl_us);
  }
}

absl::StatusOr<std::uint64_t> Shard::Reserve(const Probe& probe, const Policy& policy,
                                             std::int64_t now_us, std::int64_t estimate,
                                             std::int64_t expires_us, Decision& decision) {
  std::lock_guard lock(mu_);
  if (absl::Status room = ClaimHold(now_us); !room.ok()) return room;
  Plan plan = Evaluate(probe, policy, now_us, estimate, decision);
  if (!decision.allowed) {  // the limit's own denial first: it holds nothing
    ReturnClaim();
    SaveBlock(probe, plan, now_us);
    return 0;
  }
  if (absl::Status room = KeyHasRoom(probe, now_us); !room.ok()) {
    ReturnClaim();
    return room;  // Evaluate wrote nothing
  }
  const core::ReservationMark mark = MarkOf(probe.kind, policy, plan, now_us, estimate);
  Commit(probe, plan, now_us);
  return Hold(probe, policy, mark, expires_us);
}

absl::StatusOr<std::uint64_t> Shard::Take(const Probe& probe, const Policy& policy,
                                          std::int64_t now_us, std::int64_t up_to,
                                          std::int64_t lifetime_us, Decision& decision,
                                          core::LeaseGrant& lease) {
  std::lock_guard lock(mu_);
  if (absl::Status room = ClaimHold(now_us); !room.ok()) return room;
  // Before deciding: a take writes as it decides.
  if (absl::Status room = KeyHasRoom(probe, now_us); !room.ok()) {
    ReturnClaim();
    return room;
  }
  const Found found = Find(probe, now_us);
  if (policy.block.count() > 0) {
    // Blocked: answered as a cost-1 request (docs/algorithms.md, "Take up to k").
    if (const std::int64_t until = BlockedUntil(probe, now_us); until > now_us) {
      ReturnClaim();
      EvaluateBlocked(found, probe.kind, policy, until, now_us, 1, decision);
      return 0;
    }
  }
  core::ReservationMark mark;
  if (core::KeepsLog(probe.kind)) {
    UpdateLog(probe, found, now_us, [&](core::SlidingLog& log) {
      const std::int64_t ttl_us =
          core::TakeSlidingLog(policy, log, now_us, up_to, lifetime_us, decision, lease);
      if (lease.units > 0) mark = {log.newest().time, lease.units, log.newest().time, 0};
      return ttl_us;
    });
  } else {
    VisitValueKind(probe.kind, [&]<class S>(std::type_identity<S>, auto) {
      DecideValue<S>(probe, found, now_us, [&](const S* stored) {
        core::TakeOutcome<S> take =
            core::Take(policy, stored, now_us, up_to, lifetime_us, decision);
        lease = take.lease;
        if (lease.units > 0) mark = core::MarkAfter(policy, *take.out.write, now_us, lease.units);
        return take.out;
      });
    });
  }
  if (lease.units == 0) {
    ReturnClaim();
    if (policy.block.count() > 0 && core::StartsBlock(1, decision)) {
      core::AnswerBlockStart(policy.block.count(), decision);
      Plan started;
      started.blocked_until = now_us + policy.block.count();
      started.starts_block = true;
      SaveBlock(probe, started, now_us);
    }
    return 0;
  }
  mark.lease = true;
  return Hold(probe, policy, mark, lease.ends);
}

absl::Status Shard::KeyHasRoom(const Probe& probe, std::int64_t now_us) {
  if (!counting_holds_) {
    if (reservations_.size() < kMaxHoldsPerKey) return absl::OkStatus();  // no key can be full
    for (const auto& [number, held] : reservations_) ++holds_per_key_[held.hash];
    counting_holds_ = true;
  }
  const auto held_by_key = [&] {
    const auto it = holds_per_key_.find(probe.hash);
    return it == holds_per_key_.end() ? std::size_t{0} : it->second;
  };
  if (held_by_key() < kMaxHoldsPerKey) return absl::OkStatus();
  DropExpiredHolds(now_us);
  if (held_by_key() < kMaxHoldsPerKey) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      fmt::format("this key holds {} reservations and leases, the most one key may hold "
                  "(docs/security.md); settle or release some, or shorten their hold",
                  kMaxHoldsPerKey));
}

absl::Status Shard::ClaimHold(std::int64_t now_us) {
  if (holds_.TryClaim()) return absl::OkStatus();
  DropExpiredHolds(now_us);
  if (holds_.TryClaim()) return absl::OkStatus();
  return absl::ResourceExhaustedError(fmt::format(
      "too many reservations held: the store holds max_reservations ({}) reservations and "
      "leases; settle reservations sooner, shorten their hold, or raise max_reservations",
      holds_.max()));
}

void Shard::DropHeld(absl::flat_hash_map<std::uint64_t, Held>::iterator it) {
  if (counting_holds_) {
    const auto count = holds_per_key_.find(it->second.hash);
    if (--count->second == 0) holds_per_key_.erase(count);
  }
  reservations_.erase(it);
  holds_.Return();
  if (counting_holds_ && reservations_.size() < kMaxHoldsPerKey / 2) {
    // Stops counting well below where it starts, so that a shard near the bound does not
    // recount at every hold.
    holds_per_key_.clear();
    counting_holds_ = false;
  }
}

void Shard::DropExpiredHolds(std::int64_t now_us) {
  if (earliest_hold_end_us_ > now_us) return;
  std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
  for (auto it = reservations_.begin(); it != reservations_.end();) {
    if (it->second.expires_us <= now_us) {
      DropHeld(it++);  // abseil's erase leaves the other iterators valid
    } else {
      earliest = std::min(earliest, it->second.expires_us);
      ++it;
    }
  }
  earliest_hold_end_us_ = earliest;
}

void Shard::ReclaimExpiredHolds(std::int64_t now_us) {
  std::lock_guard lock(mu_);
  DropExpiredHolds(now_us);
}

core::ReservationMark Shard::MarkOf(core::StateKind kind, const Policy& policy, const Plan& plan,
                                    std::int64_t now_us, std::int64_t estimate) const {
  if (core::KeepsLog(kind)) {
    // The run goes where CommitSlidingLog puts it: at now, clamped to the newest run.
    const core::SlidingLog* log = plan.found.live ? plan.found.entry->state().log : nullptr;
    const std::int64_t at =
        log != nullptr && !log->empty() ? std::max(now_us, log->newest().time) : now_us;
    return core::ReservationMark{at, estimate, at, 0};
  }
  core::ReservationMark mark;
  Entry::State after = *plan.state;  // allowed at cost > 0: a value state is written
  VisitValueKind(kind, [&]<class S>(std::type_identity<S>, auto) {
    mark = core::MarkAfter(policy, StateAs<S>(after), now_us, estimate);
  });
  return mark;
}

std::uint64_t Shard::Hold(const Probe& probe, const Policy& policy,
                          const core::ReservationMark& mark, std::int64_t expires_us) {
  const std::uint64_t number = NewNumber();
  reservations_.emplace(number, Held{std::string(probe.key), probe.hash, policy, mark, expires_us});
  if (counting_holds_) ++holds_per_key_[probe.hash];
  earliest_hold_end_us_ = std::min(earliest_hold_end_us_, expires_us);
  return number;
}

std::uint64_t Shard::NewNumber() {
  for (;;) {
    const std::uint64_t number =
        (absl::Uniform<std::uint64_t>(random_) & ~number_mask_) | number_prefix_;
    if (number != 0 && !reservations_.contains(number)) return number;
  }
}

absl::Status Shard::Settle(std::uint64_t number, std::int64_t now_us, std::int64_t actual,
                           Decision& decision) {
  std::lock_guard lock(mu_);
  const auto it = reservations_.find(number);
  if (it == reservations_.end() || it->second.expires_us <= now_us) {
    const bool expired = it != reservations_.end();
    if (expired) DropHeld(it);
    return absl::NotFoundError(expired ? "reservation expired (it stays charged at its estimate)"
                                       : "unknown reservation: never made, or settled already, "
                                         "or expired");
  }
  if (it->second.policy.algorithm == Algorithm::kConcurrency && actual != 0) {
    return absl::InvalidArgumentError(core::kLeaseSettledAtACost);
  }
  Held held = std::move(it->second);
  DropHeld(it);
  const Probe probe{core::KindOf(held.policy), held.key, held.hash};
  const Found found = Find(probe, now_us);
  if (core::KeepsLog(probe.kind)) {
    UpdateLog(probe, found, now_us, [&](core::SlidingLog& log) {
      return core::SettleSlidingLog(held.policy, log, now_us, held.mark, actual, decision);
    });
    return absl::OkStatus();
  }
  VisitValueKind(probe.kind, [&]<class S>(std::type_identity<S>, auto) {
    DecideValue<S>(probe, found, now_us, [&](const S* stored) {
      return core::Settle(held.policy, stored, now_us, held.mark, actual, decision);
    });
  });
  return absl::OkStatus();
}

void Shard::Operate(const Probe& probe, const Policy& policy, std::int64_t now_us, KeyOperation op,
                    std::int64_t units, Decision& decision) {
  std::lock_guard lock(mu_);
  // Whatever the policy says now: a block left by an earlier block= goes with the reset too.
  if (op == KeyOperation::kReset && blocks_ > 0) Drop(Find(BlockProbe(probe), now_us));
  const Found found = Find(probe, now_us);
  if (core::KeepsLog(probe.kind)) {
    UpdateLog(probe, found, now_us, [&](core::SlidingLog& log) {
      return core::OperateSlidingLog(policy, log, now_us, op, units, decision);
    });
  } else {
    VisitValueKind(probe.kind, [&]<class S>(std::type_identity<S>, auto) {
      DecideValue<S>(probe, found, now_us, [&](const S* stored) {
        return core::Operate(policy, stored, now_us, op, units, decision);
      });
    });
  }
  if (op == KeyOperation::kReset || policy.block.count() == 0) return;
  if (const std::int64_t until = BlockedUntil(probe, now_us); until > now_us) {
    core::AnswerWhileBlocked(until, now_us, 0, /*would_allow=*/false, decision);
  }
}

[[gnu::always_inline]] inline void Shard::Save(const Probe& probe, Found found,
                                               Entry::State state, std::int64_t now_us,
                                               std::int64_t expires_us) {
  if (found.entry == nullptr) return Insert(probe, state, now_us, expires_us);
  found.entry->Replace(state, SecondsCeil(expires_us));
  if (core::KeepsLog(probe.kind)) {  // another log: value states keep their size
    CountLog(*found.entry);
    FitBytes(SecondsFloor(now_us));
  }
}

[[gnu::noinline]] void Shard::Insert(const Probe& probe, Entry::State state, std::int64_t now_us,
                                     std::int64_t expires_us) {
  const std::uint32_t now_s = SecondsFloor(now_us);
  Sweep(now_s, kSweepPerInsert);
  if (entries_.size() >= max_keys_ && Sweep(now_s, kSweepWhenFull) == 0) MakeRoom(now_s);
  const std::uint32_t slot =
      entries_.push_back(Entry(CompactKey(static_cast<std::uint8_t>(probe.kind), probe.key, arena_),
                               state, SecondsCeil(expires_us)));
  Entry& entry = entries_[slot];
  if (core::KeepsLog(probe.kind)) entry.set_counted_log_bytes(state.log->heap_bytes());
  bytes_ += BytesOf(entry);
  index_.insert(slot);
  ++layout_;
  FitBytes(now_s);
}

std::size_t Shard::BytesOf(const Entry& entry) {
  std::size_t bytes = kEntryBytes;
  if (entry.key().in_arena()) bytes += entry.key().size();
  if (core::KeepsLog(entry.kind())) bytes += sizeof(core::SlidingLog) + entry.counted_log_bytes();
  return bytes;
}

void Shard::CountLog(Entry& entry) {
  const std::size_t now = entry.state().log->heap_bytes();
  bytes_ = bytes_ - entry.counted_log_bytes() + now;
  entry.set_counted_log_bytes(now);
}

// Bounded: each MakeRoom removes an entry.
void Shard::FitBytes(std::uint32_t now_s) {
  while (bytes_ > max_bytes_ && entries_.size() > 1) MakeRoom(now_s);
}

void Shard::Drop(Found found) {
  if (found.entry == nullptr) return;
  if (!found.live) ++expired_;
  RemoveAt(found.slot);
}

[[gnu::noinline]] void Shard::RemoveAt(std::uint32_t slot) {
  ++layout_;
  bytes_ -= BytesOf(entries_[slot]);
  index_.erase(slot);
  if (entries_[slot].key().in_arena()) arena_.Release(entries_[slot].key().size());
  if (entries_[slot].key().tag() & kBlockTag) --blocks_;
  const std::uint32_t last = entries_.size() - 1;
  if (slot != last) {
    index_.erase(last);
    entries_[slot] = std::move(entries_[last]);
    index_.insert(slot);
  }
  entries_.pop_back();
  if (arena_.WantsCompaction()) CompactKeys();
}

// Copies the live long keys into fresh blocks: O(bytes of live long keys), run once
// deleted keys hold a quarter of the arena, so at most 3 bytes copied per byte freed.
void Shard::CompactKeys() {
  KeyArena fresh;
  for (std::uint32_t i = 0; i < entries_.size(); ++i) entries_[i].key().MoveTo(fresh);
  arena_ = std::move(fresh);
}

// Least recently used, approximated by CLOCK (second chance): the hand skips, and
// clears, entries used since it last passed, and takes the first one that was not. It
// prefers an expired entry it meets on the way. Amortised O(1) per eviction; one pass
// over the shard at worst.
void Shard::MakeRoom(std::uint32_t now_s) {
  for (std::size_t scanned = 0;; ++scanned) {
    if (clock_hand_ >= entries_.size()) clock_hand_ = 0;
    Entry& entry = entries_[clock_hand_];
    if (entry.expired(now_s)) {
      ++expired_;
      break;
    }
    if (!entry.referenced() || scanned >= entries_.size()) {
      ++evictions_;
      break;
    }
    entry.set_referenced(false);
    ++clock_hand_;
  }
  RemoveAt(clock_hand_);
  // The slot now holds the entry that was last in the array (the newest); skip it so a
  // new key is not the next one evicted.
  ++clock_hand_;
}

// The cursor walks down the array. Removing entry i moves the last entry into slot i;
// walking down, that entry has been looked at already (or was just inserted), so every
// look is at a new entry and none is wasted.
std::size_t Shard::Sweep(std::uint32_t now_s, std::size_t budget) {
  std::size_t reclaimed = 0;
  for (; budget > 0 && entries_.size() > 0; --budget) {
    if (sweep_cursor_ == 0 || sweep_cursor_ > entries_.size()) sweep_cursor_ = entries_.size();
    const std::uint32_t slot = --sweep_cursor_;
    if (entries_[slot].expired(now_s)) {
      RemoveAt(slot);
      ++expired_;
      ++reclaimed;
    }
  }
  return reclaimed;
}

std::size_t Shard::ReclaimExpired(std::int64_t now_us, std::size_t budget) {
  std::lock_guard lock(mu_);
  return Sweep(SecondsFloor(now_us), budget);
}

StoreStats Shard::Stats() {
  std::lock_guard lock(mu_);
  return StoreStats{entries_.size(), evictions_, expired_, reservations_.size()};
}

std::size_t Shard::Bytes() {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace floodgate::memory

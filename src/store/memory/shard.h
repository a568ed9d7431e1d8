#pragma once

// A memory shard: keys decided under its lock, expiry sweeps, CLOCK eviction, reservations.

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <absl/random/random.h>
#include <absl/status/statusor.h>
#include <floodgate/decision.h>
#include <floodgate/policy.h>
#include <floodgate/store.h>

#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <string_view>

#include "common/spin_lock.h"
#include "core/settle.h"
#include "core/state_kind.h"
#include "core/take.h"
#include "store/memory/entry.h"
#include "store/memory/hold_budget.h"

namespace floodgate::memory {

// A key being looked up, with its hash computed once (it also picked the shard).
struct Probe {
  core::StateKind kind;
  std::string_view key;
  std::size_t hash;
};

// The hash of the state `key` keeps under `kind`: the key's hash with the kind in its
// lowest bits. The top bits pick the shard and SwissTable's position (H1) leaves out the
// lowest 7, so the states one key keeps under several algorithms (a multi-decision's
// "10/s and 10,000/day" for one client) sit in one shard and one index group: deciding
// them together takes one lock and one index miss. The kind lands in the control byte
// (H2), so a lookup tells them apart there, without reading the other entries.
std::size_t KeyHash(std::string_view key);
inline std::size_t StateHash(std::size_t key_hash, core::StateKind kind) {
  return key_hash ^ static_cast<std::size_t>(kind);
}

// The most reservations and leases one key (under one algorithm) holds at once: the
// largest concurrency:N (docs/leases.md), so a key holds every lease its limit allows,
// and a key with a larger limit (a reserve under gcra:10^9/1s, held 24 h) cannot take
// more than a tenth of the default max_reservations from the other keys.
inline constexpr std::size_t kMaxHoldsPerKey = kMaxSlidingLogLimit;

// One lock's worth of keys. The index is abseil's SwissTable holding 4-byte positions
// into a dense EntryArray: 40 bytes of entry plus ~6-11 bytes of index per key, where a
// flat_hash_map<std::string, State> would spend 50-100. Positions also let the eviction
// clock and the expiry sweep walk the array with cursors that survive inserts, which no
// map's iterators do.
class alignas(64) Shard {  // own cache lines: no false sharing between locks
 public:
  // Reservation numbers carry `number_prefix` in the bits `number_mask` selects (the
  // bits that pick this shard from a key's hash), so a number finds its shard. `holds`
  // is the store's, shared by its shards (it outlives them).
  Shard(std::size_t max_keys, std::size_t max_bytes, HoldBudget& holds, std::uint64_t number_prefix,
        std::uint64_t number_mask);
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Thread-safe. Writes the decision into `decision` (the caller's final copy: a Decision
  // copied as a whole right after it was written field by field stalls store-to-load
  // forwarding, measured as a large share of an in-memory decision).
  void Decide(const Probe& probe, const Policy& policy, std::int64_t now_us, std::int64_t cost,
              Decision& decision);
  // A multi-decision's steps on one item, with the shard's lock held by the caller (the
  // store takes every involved shard's lock, in shard order, before the first step).
  // Evaluate decides the item and writes nothing (a sliding log is trimmed, which no
  // decision can see); Commit writes what Evaluate decided to write.
  // The entry found for a probe, if any. An expired entry is as good as absent: its
  // state is the fresh state by definition of the TTLs.
  struct Found {
    Entry* entry = nullptr;
    std::uint32_t slot = 0;
    bool live = false;
  };
  struct Plan {
    std::optional<Entry::State> state;  // value kinds: what to save (ttl_us <= 0: drop)
    std::int64_t append = 0;            // sliding log: the units admitted
    std::int64_t append_at = 0;         // sliding log: their run's time (delay=: its start)
    std::int64_t ttl_us = 0;
    Found found;  // where the key was: valid while layout_ (below) stays what it was
    std::uint64_t layout = 0;
    // block=D (core/block.h): the key's blocked_until when evaluated, and whether this
    // decision started that block (saved whether or not a multi-decision commits).
    std::int64_t blocked_until = 0;
    bool starts_block = false;
  };
  SpinLock& mutex() { return mu_; }
  // Starts loading the index's lines for the probe (lock held: the index may be resized
  // under it), so that several items' cache misses overlap instead of queuing.
  void Prefetch(const Probe& probe) const { index_.prefetch(probe); }
  Plan Evaluate(const Probe& probe, const Policy& policy, std::int64_t now_us, std::int64_t cost,
                Decision& decision);
  // The item decided again under delay= in `window` (core/multi.h Redecide), from what
  // Evaluate found (`own`, its plan): replaces that plan.
  Plan EvaluateInWindow(const Probe& probe, const Plan& own, const Policy& policy,
                        std::int64_t now_us, std::int64_t cost, core::DelayWindow window,
                        Decision& decision);
  // The item's peek (cost 0), from what Evaluate found: a denied request's other items.
  // Looked up again when an earlier item's block moved entries (as Commit).
  void Peek(const Probe& probe, const Plan& plan, const Policy& policy, std::int64_t now_us,
            Decision& decision);
  // The plan's lookup is used (saving a cache miss) unless an entry was inserted or
  // removed in this shard since Evaluate (an earlier item's commit): then the key is
  // looked up again.
  void Commit(const Probe& probe, const Plan& plan, std::int64_t now_us);
  // Saves the block a plan started (Plan::starts_block), whatever the rest of the request:
  // an entry of its own (BlockProbe), inserted as a key is, so it may move entries.
  void SaveBlock(const Probe& probe, const Plan& plan, std::int64_t now_us);

  // Thread-safe. Decides cost = estimate and, when allowed, holds a reservation until
  // `expires_us` (docs/reservations.md). Returns its number, or 0 when denied;
  // ResourceExhausted, deciding nothing, when the key or the store holds as many as it
  // may (ClaimHold).
  absl::StatusOr<std::uint64_t> Reserve(const Probe& probe, const Policy& policy,
                                        std::int64_t now_us, std::int64_t estimate,
                                        std::int64_t expires_us, Decision& decision);
  // Thread-safe. take(k, δ) (core/take.h): leases up to `up_to` units for `lifetime_us` and,
  // when any, holds them as a reservation until the lease ends. Returns its number, or 0
  // when nothing is leased; ResourceExhausted as Reserve.
  absl::StatusOr<std::uint64_t> Take(const Probe& probe, const Policy& policy, std::int64_t now_us,
                                     std::int64_t up_to, std::int64_t lifetime_us,
                                     Decision& decision, core::LeaseGrant& lease);
  // A multi-decision's reservations and leases (docs/leases.md), with the lock held by
  // the caller: a claim on one more hold in the store (ResourceExhausted when it holds
  // max_reservations after this shard's expired ones are dropped), which the caller
  // either holds (Hold) or gives back (ReturnClaim); whether the probe's key may hold one
  // more (ResourceExhausted at kMaxHoldsPerKey), asked once the limit admitted it, so
  // that a full limit answers its own denial; what a reservation of `estimate` that
  // Evaluate planned to admit remembers (before any commit in the shard moves the entry
  // found); and the reservation held for it, by number.
  absl::Status ClaimHold(std::int64_t now_us);
  void ReturnClaim() { holds_.Return(); }
  absl::Status KeyHasRoom(const Probe& probe, std::int64_t now_us);
  core::ReservationMark MarkOf(core::StateKind kind, const Policy& policy, const Plan& plan,
                               std::int64_t now_us, std::int64_t estimate) const;
  std::uint64_t Hold(const Probe& probe, const Policy& policy, const core::ReservationMark& mark,
                     std::int64_t expires_us);

  // Thread-safe. Settles reservation `number` at `actual`; NotFound when it is unknown,
  // settled already or expired.
  absl::Status Settle(std::uint64_t number, std::int64_t now_us, std::int64_t actual,
                      Decision& decision);

  // Thread-safe. Operates on the probe's key (core/operate.h) and writes its peek after it,
  // the block included: a reset removes the block, the other operations leave it.
  void Operate(const Probe& probe, const Policy& policy, std::int64_t now_us, KeyOperation op,
               std::int64_t units, Decision& decision);

  // Thread-safe. Looks at up to `budget` entries, reclaiming the expired ones.
  std::size_t ReclaimExpired(std::int64_t now_us, std::size_t budget);
  // Thread-safe. Drops the reservations whose hold has ended (nothing when none can have:
  // a full store asks every shard before it refuses).
  void ReclaimExpiredHolds(std::int64_t now_us);
  // Thread-safe.
  StoreStats Stats();
  // Thread-safe. The bytes held as max_bytes counts them (BytesOf).
  std::size_t Bytes();

 private:
  struct IndexHash {
    using is_transparent = void;
    const EntryArray* entries;
    std::size_t operator()(std::uint32_t i) const {
      const CompactKey& key = (*entries)[i].key();
      return StateHash(KeyHash(key.bytes()), static_cast<core::StateKind>(key.tag()));
    }
    std::size_t operator()(const Probe& probe) const { return probe.hash; }
  };
  struct IndexEq {
    using is_transparent = void;
    const EntryArray* entries;
    bool operator()(std::uint32_t a, std::uint32_t b) const { return a == b; }
    bool operator()(std::uint32_t i, const Probe& p) const {
      return (*entries)[i].key().Equals(static_cast<std::uint8_t>(p.kind), p.key);
    }
    bool operator()(const Probe& p, std::uint32_t i) const { return (*this)(i, p); }
  };
  using Index = absl::flat_hash_set<std::uint32_t, IndexHash, IndexEq>;

  // A plan (nothing written) from a decision made by decide_log(log) (a sliding log's:
  // returns its TTL) or decide_value(stored, the kind's core function) (a value state's:
  // returns its Outcome); `decision` is the one they write.
  template <class LogFn, class ValueFn>
  Plan PlanFrom(Found found, core::StateKind kind, std::int64_t now_us, std::int64_t cost,
                const Decision& decision, LogFn decide_log, ValueFn decide_value);
  Plan EvaluateFound(Found found, core::StateKind kind, const Policy& policy, std::int64_t now_us,
                     std::int64_t cost, Decision& decision);
  // EvaluateFound under policy.block (core/block.h), on a key blocked until `blocked_until`.
  Plan EvaluateBlocked(Found found, core::StateKind kind, const Policy& policy,
                       std::int64_t blocked_until, std::int64_t now_us, std::int64_t cost,
                       Decision& decision);
  // blocked_until of the probe's key (0: none or over). Moves no entry: an ended block's
  // entry is expired, and goes as expired keys go.
  std::int64_t BlockedUntil(const Probe& probe, std::int64_t now_us);
  // A key's block is an entry of its own, tagged with the state's kind | kBlockTag: in
  // the state's index group (the tag differs in H2's bits only), counted by max_keys and
  // evicted by the CLOCK like any key, and paid for only by keys that are blocked.
  static constexpr std::uint8_t kBlockTag = 8;
  // Every kind's tag leaves kBlockTag's bit clear, so a block's tag is no state's.
  static_assert(static_cast<std::uint8_t>(core::StateKind::kConcurrency) < kBlockTag);
  static Probe BlockProbe(const Probe& probe) {
    return Probe{static_cast<core::StateKind>(static_cast<std::uint8_t>(probe.kind) | kBlockTag),
                 probe.key, probe.hash ^ kBlockTag};
  }
  // `decide(const S* stored)` writes the decision and returns what to save.
  Found Find(const Probe& probe, std::int64_t now_us);
  template <class S, class DecideFn>
  void DecideValue(const Probe& probe, Found found, std::int64_t now_us, DecideFn decide);
  // `update(SlidingLog&)` changes the key's log (an empty one when it has none) and
  // returns its TTL; the log is then saved, or the key dropped.
  template <class UpdateFn>
  void UpdateLog(const Probe& probe, Found found, std::int64_t now_us, UpdateFn update);

  // Saves state for the probe's key: updates the found entry or inserts a new one
  // (Insert, out of line: a decision on a known key, the common one, pays no call).
  void Save(const Probe& probe, Found found, Entry::State state, std::int64_t now_us,
            std::int64_t expires_us);
  void Insert(const Probe& probe, Entry::State state, std::int64_t now_us,
              std::int64_t expires_us);
  void Drop(Found found);
  void RemoveAt(std::uint32_t slot);
  void MakeRoom(std::uint32_t now_s);
  // What max_bytes counts of an entry: the entry and its index slot, its key's bytes in
  // the arena, a sliding log's object and its buffer as last counted (CountLog).
  static std::size_t BytesOf(const Entry& entry);
  // Counts the entry's sliding log (KeepsLog) at its present size; every change to a
  // log is counted so, and an entry leaves with what was counted for it.
  void CountLog(Entry& entry);
  // Evicts (CLOCK) while the shard holds more than its max_bytes, keeping one entry.
  void FitBytes(std::uint32_t now_s);
  std::size_t Sweep(std::uint32_t now_s, std::size_t budget);
  void CompactKeys();

  // A reservation, held in the shard of its key.
  struct Held {
    std::string key;
    std::size_t hash;
    Policy policy;
    core::ReservationMark mark;
    std::int64_t expires_us;
  };
  std::uint64_t NewNumber();
  void DropHeld(absl::flat_hash_map<std::uint64_t, Held>::iterator it);
  void DropExpiredHolds(std::int64_t now_us);

  SpinLock mu_;
  EntryArray entries_;
  // Counts inserts and removals: a Found taken at another count may point at another key.
  std::uint64_t layout_ = 0;
  KeyArena arena_;  // the bytes of long keys
  Index index_;
  const std::size_t max_keys_;
  const std::size_t max_bytes_;
  std::size_t bytes_ = 0;           // BytesOf every entry
  std::uint32_t clock_hand_ = 0;    // eviction (MakeRoom)
  std::uint32_t sweep_cursor_ = 0;  // expiry (Sweep): one past the next entry to look at
  std::uint64_t evictions_ = 0;
  std::uint64_t expired_ = 0;
  std::size_t blocks_ = 0;  // block entries held: none, and a block policy's lookup is skipped

  absl::flat_hash_map<std::uint64_t, Held> reservations_;
  // Reservations held per key, by the state's hash (Held::hash): kMaxHoldsPerKey. Two
  // keys of one hash (64 bits) would share a count: a bound still, never a wrong decision.
  // Counted only while the shard holds kMaxHoldsPerKey or more (until it holds half as
  // many), the only time a key can reach it: a shard holding fewer pays nothing per hold.
  absl::flat_hash_map<std::size_t, std::uint32_t> holds_per_key_;
  bool counting_holds_ = false;
  // No hold ends before this (a lower bound: a settle may have taken the earliest), so a
  // full store asks each shard in O(1) whether it has anything to reclaim.
  std::int64_t earliest_hold_end_us_ = std::numeric_limits<std::int64_t>::max();
  HoldBudget& holds_;
  const std::uint64_t number_prefix_;
  const std::uint64_t number_mask_;
  absl::BitGen random_;  // unpredictable numbers: one client cannot settle another's
};

}  // namespace floodgate::memory

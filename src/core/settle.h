#pragma once

// Settling reservations: pure functions that charge or refund what the actual cost changed.
//
// Reservations: a cost reserved as an estimate, settled later at the actual cost
// (docs/reservations.md is the contract). Pure functions, as core/algorithms.h: a
// reservation is decided by the algorithm itself at cost = estimate; what it remembers of
// its key comes from MarkAfter, and Settle applies the difference.
//
// Conventions beyond those of core/algorithms.h:
// - actual < estimate refunds, but only what the key still owes for the reservation:
//   capacity that time has already given back (the span of a gcra reservation behind
//   now, a bucket's deficit refilled since, a window no longer counted) is not given
//   back twice. A refund never admits more than "only `actual` was reserved" would have.
// - actual > estimate charges the difference to the key as it stands at the settle
//   time; it may take the key below empty (the next requests wait longer), within the
//   bounds below, and never touches the settled request itself.
// - The decision written is the key's peek (cost 0) after the settle.

#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/algorithms.h"

namespace floodgate::core {

// A lease (docs/leases.md) is a reservation of 1 that its release settles at 0. Settled at
// any other cost it is refused and stays held: a lease is one unit, never a cost to charge.
inline constexpr char kLeaseSettledAtACost[] =
    "a lease is released (settled at 0), never settled at a cost: it stays held";

// What a reservation remembers of its key, taken right after it was admitted.
struct ReservationMark {
  std::int64_t at = 0;        // its decision time, as the algorithm clamped it
  std::int64_t estimate = 0;  // the cost reserved (>= 1)
  // gcra: the tat right after the reservation. sliding_log: the time of its run.
  // fixed/sliding window: the window index it was counted in. token_bucket interval:
  // the refill phase (`last`) right after it. Unused by the smooth bucket.
  std::int64_t mark = 0;
  // token_bucket: the bucket's deficit (capacity - tokens) right after the reservation.
  double deficit = 0;
  // A take's lease (core/take.h): on gcra and the buckets its return refunds only while the
  // key is as the take left it. A lease is charged as if spent at its end, a later one on
  // top of it likewise; moving the key back under a later lease's charge would let that
  // one's units count earlier than they may be spent (docs/prefetch.md, "Returns").
  bool lease = false;
};

// Whether a settle of `mark` may refund on a key whose state is now `unchanged` (as the
// reservation left it) or not.
inline bool MayRefund(const ReservationMark& mark, bool unchanged) {
  return !mark.lease || unchanged;
}

// How far below empty an overcharge may take a key: a wait of at most this long for
// gcra and the buckets; window counts saturate at limit + kMaxCost. Large enough that
// no real overcharge meets it, small enough that every value stays exact in the doubles
// Lua computes with.
inline constexpr std::int64_t kMaxSettleWaitUs = 10LL * 366 * 86'400 * 1'000'000;

inline ReservationMark MarkAfter(const Policy&, const GcraState& after, std::int64_t now,
                                 std::int64_t estimate) {
  return {now, estimate, after.tat, 0};
}
inline ReservationMark MarkAfter(const Policy& policy, const SmoothBucketState& after, std::int64_t,
                                 std::int64_t estimate) {
  return {after.last, estimate, 0, D(policy.capacity()) - after.tokens};
}
inline ReservationMark MarkAfter(const Policy& policy, const IntervalBucketState& after,
                                 std::int64_t now, std::int64_t estimate) {
  return {now, estimate, after.last, D(policy.capacity()) - after.tokens};
}
inline ReservationMark MarkAfter(const Policy&, const FixedWindowState& after, std::int64_t now,
                                 std::int64_t estimate) {
  return {now, estimate, after.window, 0};
}
inline ReservationMark MarkAfter(const Policy&, const SlidingWindowState& after, std::int64_t now,
                                 std::int64_t estimate) {
  return {now, estimate, after.window, 0};
}

// The tokens a bucket gets back: the unused part of the reservation, but no more than
// the deficit it left that is still unrefilled (`refilled`: tokens refilled since).
inline double BucketRefund(const ReservationMark& mark, std::int64_t actual, double refilled) {
  return std::min(D(mark.estimate - actual), std::max(0.0, mark.deficit - refilled));
}

// The lowest level an overcharge may take a bucket to: kMaxSettleWaitUs of refill.
inline double BucketFloor(const Policy& policy) {
  return -(D(policy.limit) * D(kMaxSettleWaitUs) / D(policy.period.count()));
}

// Whether a bucket settle writes: not when actual = estimate, nor for a refund to a key
// already gone (a full bucket has nothing to take back).
inline bool BucketSettleWrites(bool stored, const ReservationMark& mark, std::int64_t actual) {
  return actual != mark.estimate && (stored || actual > mark.estimate);
}

// A bucket's level after a settle, either refill mode: the refund (`refilled`: tokens
// refilled since the reservation) capped at the capacity, or the overcharge down to
// `floor`.
inline double SettledLevel(const Policy& policy, double tokens, const ReservationMark& mark,
                           std::int64_t actual, double refilled, double floor) {
  if (actual < mark.estimate) {
    return std::min(D(policy.capacity()), tokens + BucketRefund(mark, actual, refilled));
  }
  return std::max(floor, tokens - D(actual - mark.estimate));
}

// A settle answers with the key's peek (cost 0) after it, and a write lives as long as
// that peek's reset.
template <typename State>
Outcome<State> PeekAfterSettle(Outcome<State> out,
                               Outcome<State> (*decide)(const Policy&, const State*, std::int64_t,
                                                        std::int64_t, Decision&),
                               const Policy& policy, const State* stored, std::int64_t now,
                               Decision& decision) {
  decide(policy, out.write ? &*out.write : stored, now, 0, decision);
  out.ttl_us = decision.reset_after.count();
  return out;
}

inline Outcome<GcraState> Settle(const Policy& policy, const GcraState* stored, std::int64_t now,
                                 const ReservationMark& mark, std::int64_t actual,
                                 Decision& decision) {
  const std::int64_t emission = GcraEmissionUs(policy);
  Outcome<GcraState> out;
  if (actual < mark.estimate && stored != nullptr && stored->tat > now &&
      MayRefund(mark, stored->tat == mark.mark)) {
    // The reservation spans [mark - estimate*E, mark) of virtual time; its unused tail
    // comes back, except what already lies behind now.
    const std::int64_t refund =
        std::min((mark.estimate - actual) * emission, std::max<std::int64_t>(0, mark.mark - now));
    if (refund > 0) out.write = GcraState{stored->tat - refund};
  } else if (actual > mark.estimate) {
    const std::int64_t tat = stored != nullptr ? std::max(stored->tat, now) : now;
    const std::int64_t ceiling = now + policy.capacity() * emission + kMaxSettleWaitUs;
    const std::int64_t extra = actual - mark.estimate;
    out.write = GcraState{extra <= (ceiling - tat) / emission ? tat + extra * emission : ceiling};
  }
  return PeekAfterSettle(std::move(out), &DecideGcra, policy, stored, now, decision);
}

inline Outcome<SmoothBucketState> Settle(const Policy& policy, const SmoothBucketState* stored,
                                         std::int64_t now, const ReservationMark& mark,
                                         std::int64_t actual, Decision& decision) {
  Outcome<SmoothBucketState> out;
  const bool unchanged = stored != nullptr && stored->last == mark.at &&
                         D(policy.capacity()) - stored->tokens == mark.deficit;
  if (actual < mark.estimate && !MayRefund(mark, unchanged)) actual = mark.estimate;
  if (BucketSettleWrites(stored != nullptr, mark, actual)) {
    const SmoothBucketState before =
        stored != nullptr ? *stored : SmoothBucketState{D(policy.capacity()), now};
    now = std::max(now, before.last);
    const double refilled = D(now - mark.at) * D(policy.limit) / D(policy.period.count());
    out.write = SmoothBucketState{SettledLevel(policy, SmoothLevel(policy, before, now).At(0), mark,
                                               actual, refilled, BucketFloor(policy)),
                                  now};
  }
  return PeekAfterSettle(std::move(out), &DecideSmoothBucket, policy, stored, now, decision);
}

inline Outcome<IntervalBucketState> Settle(const Policy& policy, const IntervalBucketState* stored,
                                           std::int64_t now, const ReservationMark& mark,
                                           std::int64_t actual, Decision& decision) {
  Outcome<IntervalBucketState> out;
  const bool unchanged = stored != nullptr && stored->last == mark.mark &&
                         D(policy.capacity()) - stored->tokens == mark.deficit;
  if (actual < mark.estimate && !MayRefund(mark, unchanged)) actual = mark.estimate;
  if (BucketSettleWrites(stored != nullptr, mark, actual)) {
    IntervalBucketState state = RefillInterval(policy, stored, now);
    const double refilled =
        std::floor(D(now - mark.mark) / D(policy.period.count())) * D(policy.limit);
    state.tokens =
        SettledLevel(policy, state.tokens, mark, actual, refilled, std::floor(BucketFloor(policy)));
    out.write = state;
  }
  return PeekAfterSettle(std::move(out), &DecideIntervalBucket, policy, stored, now, decision);
}

// A window count after a settle: within 0..limit + kMaxCost.
inline std::int64_t SettledCount(const Policy& policy, std::int64_t count, std::int64_t delta) {
  return std::clamp<std::int64_t>(count + delta, 0, policy.limit + kMaxCost);
}

inline Outcome<FixedWindowState> Settle(const Policy& policy, const FixedWindowState* stored,
                                        std::int64_t now, const ReservationMark& mark,
                                        std::int64_t actual, Decision& decision) {
  Outcome<FixedWindowState> out;
  const auto [at, w] = ClampedWindow(now, policy.period.count(), stored);
  const std::int64_t count = stored != nullptr && stored->window == w ? stored->count : 0;
  // A refund only while the reservation's window still counts; an overcharge goes to
  // the window counted now (the reservation's, or the one after it).
  const std::int64_t delta = actual < mark.estimate ? (mark.mark == w ? actual - mark.estimate : 0)
                                                    : actual - mark.estimate;
  if (delta != 0 && (count > 0 || delta > 0)) {
    out.write = FixedWindowState{w, SettledCount(policy, count, delta)};
  }
  return PeekAfterSettle(std::move(out), &DecideFixedWindow, policy, stored, at, decision);
}

inline Outcome<SlidingWindowState> Settle(const Policy& policy, const SlidingWindowState* stored,
                                          std::int64_t now, const ReservationMark& mark,
                                          std::int64_t actual, Decision& decision) {
  Outcome<SlidingWindowState> out;
  const auto [at, w] = ClampedWindow(now, policy.period.count(), stored);
  const WindowCounts counts = CountsAt(stored, w);
  std::int64_t cur = counts.cur;
  std::int64_t prev = counts.prev;
  const std::int64_t delta = actual - mark.estimate;
  // The reservation's own window takes the difference while it still counts (as current
  // or previous); an overcharge whose window no longer counts goes to the current one.
  if (mark.mark == w - 1) {
    prev = SettledCount(policy, prev, delta);
  } else if (mark.mark == w || delta > 0) {
    cur = SettledCount(policy, cur, delta);
  }
  if (cur != counts.cur || prev != counts.prev) {
    out.write =
        SlidingWindowState{w, static_cast<std::uint32_t>(cur), static_cast<std::uint32_t>(prev)};
  }
  return PeekAfterSettle(std::move(out), &DecideSlidingWindow, policy, stored, at, decision);
}

// The log is updated in place; returns when the key may be dropped (0: the log is empty).
// The reservation's run shrinks or grows while it is in the window; an overcharge after
// it left goes to the newest run (a new run at `now` when the log is empty), so a log
// never holds more runs than admissions.
std::int64_t SettleSlidingLog(const Policy& policy, SlidingLog& log, std::int64_t now,
                              const ReservationMark& mark, std::int64_t actual, Decision& decision);

}  // namespace floodgate::core

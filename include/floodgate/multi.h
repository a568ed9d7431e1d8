#pragma once

// Several limits in one decision, all or nothing (docs/multi.md is the contract).

#include <absl/container/inlined_vector.h>
#include <absl/functional/any_invocable.h>
#include <absl/status/statusor.h>
#include <floodgate/decision.h>
#include <floodgate/policy.h>
#include <floodgate/time.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace floodgate {

// At most this many items in one multi-decision.
inline constexpr std::size_t kMaxItems = 16;

// One limit of a multi-decision.
struct CheckItem {
  std::string_view key;  // 1..kMaxKeyBytes bytes, binary-safe
  Policy policy;
  // 0..kMaxCost; 0 is a peek. Under a concurrency policy 0 or 1: 1 acquires a lease
  // (docs/leases.md, "In a multi-decision").
  std::int64_t cost = 1;
  std::string_view name;  // reported in denied_by / would_deny (may be empty)
  // Decided and counted as usual, but never denies the request (a limit being rolled
  // out): its denials show in would_deny.
  bool shadow = false;
  // When set (kMinHold..kMaxHold), the item is a reservation of `cost` (its estimate)
  // held that long for its settle (docs/reservations.md, "In a multi-decision"). Not for
  // a concurrency item, whose lease time is its hold.
  std::chrono::microseconds hold{0};
};

// How long an item holds what it takes when the request is allowed: a concurrency item
// at cost 1 its lease time, an item with a hold (and cost > 0) that hold; else 0, the
// item holds nothing.
inline std::chrono::microseconds HoldOf(const CheckItem& item) {
  if (item.cost <= 0) return std::chrono::microseconds(0);
  if (item.policy.algorithm == Algorithm::kConcurrency) return item.policy.period;
  return item.hold;
}

struct MultiRequest {
  std::span<const CheckItem> items;  // 1..kMaxItems; no two share a key and algorithm
  // Decision time for every item; the store's own clock when unset.
  std::optional<TimePoint> now;
};

// What a multi-decision holds for its item `item` (HoldOf(item) > 0): a lease, released
// with Store::Release(id), or a reservation, settled with Store::Settle(id, actual); by
// itself a lease frees itself at `expires`, a reservation stays charged at its estimate.
struct HeldReservation {
  std::size_t item = 0;
  std::string id;
  TimePoint expires;
};

// The answer to a multi-decision (docs/multi.md, "The answer"). Its lists hold a few
// items in place: answering a typical multi-decision allocates nothing.
struct MultiDecision {
  using Indexes = absl::InlinedVector<std::size_t, 4>;
  // User-provided, so that value-initialisation (StatusOr's in_place, `MultiDecision()`)
  // runs the member initialisers only, instead of first zeroing all ~400 bytes (a
  // `rep stos`: with the one zeroing the Work items of memory::// (MemoryStore), ~6% of the
  // time of a two-item memory:// multi-decision, measured).
  MultiDecision() {}
  bool allowed = false;
  absl::InlinedVector<Decision, 4> items;  // in request order
  // The item that binds: when allowed, the enforced item with the least remaining (first
  // on ties); when denied, the denying item with the longest wait (-1 the longest).
  std::size_t binding = 0;
  // 0 when allowed; else the longest of the denying items' waits, or Decision::kNever.
  std::chrono::microseconds retry_after{0};
  // Allowed under delay= (docs/algorithms.md, "Waiting"): every enforced item was charged
  // as a decision at now + delay, and the request waits that long before it proceeds
  // (each such item's decision says the same delay). 0 when it may proceed at once.
  std::chrono::microseconds delay{0};
  Indexes denied_by;      // enforced items that denied, in request order
  Indexes would_deny;     // shadow items that denied on their own
  bool degraded = false;  // some item was answered by on_error
  // Items whose decision is not known (each reads as allowed, with remaining 0): not asked
  // because a denial was answered from the denial cache, or their store call failed.
  Indexes unknown;
  bool from_denial_cache = false;  // denied by the denial cache, without a round trip
  // Allowed only: what the request holds, one per item with HoldOf(item) > 0 that was
  // allowed (none for an item answered by on_error: there is nothing to settle), in
  // item order.
  absl::InlinedVector<HeldReservation, 1> held;

  // The single-decision view clients see (X-RateLimit-*, the Decision JSON): the binding
  // item's decision with the combined retry_after, the request's delay (delay_us when any
  // item has delay=) and the degraded flag.
  Decision Summary() const;
};

using MultiCallback = absl::AnyInvocable<void(absl::StatusOr<MultiDecision>)>;

// The checks Store::DecideAll() applies: 1..kMaxItems items, each valid as a single
// request, no two on the same key under the same algorithm.
absl::Status ValidateMultiRequest(const MultiRequest& request);

}  // namespace floodgate

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
};

struct MultiRequest {
  std::span<const CheckItem> items;  // 1..kMaxItems; no two share a key and algorithm
  // Decision time for every item; the store's own clock when unset.
  std::optional<TimePoint> now;
};

// A lease a multi-decision holds for its item `item` (a concurrency limit at cost 1):
// released with Store::Release(id), or free by itself at `expires`.
struct HeldLease {
  std::size_t item = 0;
  std::string id;
  TimePoint expires;
};

// The answer to a multi-decision (docs/multi.md, "The answer"). Its lists hold a few
// items in place: answering a typical multi-decision allocates nothing.
struct MultiDecision {
  using Indexes = absl::InlinedVector<std::size_t, 4>;
  bool allowed = false;
  absl::InlinedVector<Decision, 4> items;  // in request order
  // The item that binds: when allowed, the enforced item with the least remaining (first
  // on ties); when denied, the denying item with the longest wait (-1 the longest).
  std::size_t binding = 0;
  // 0 when allowed; else the longest of the denying items' waits, or Decision::kNever.
  std::chrono::microseconds retry_after{0};
  Indexes denied_by;      // enforced items that denied, in request order
  Indexes would_deny;     // shadow items that denied on their own
  bool degraded = false;  // some item was answered by on_error
  // Items whose decision is not known (each reads as allowed, with remaining 0): not asked
  // because a denial was answered from the denial cache, or their store call failed.
  Indexes unknown;
  bool from_denial_cache = false;  // denied by the denial cache, without a round trip
  // Allowed only: the leases taken, one per concurrency item at cost 1 that was allowed
  // (a lease the store could not make, as on_error's answer, has none), in item order.
  absl::InlinedVector<HeldLease, 1> leases;

  // The single-decision view clients see (X-RateLimit-*, the Decision JSON): the binding
  // item's decision with the combined retry_after and the degraded flag.
  Decision Summary() const;
};

using MultiCallback = absl::AnyInvocable<void(absl::StatusOr<MultiDecision>)>;

// The checks Store::DecideAll() applies: 1..kMaxItems items, each valid as a single
// request, no two on the same key under the same algorithm.
absl::Status ValidateMultiRequest(const MultiRequest& request);

}  // namespace floodgate

#pragma once

// Reservations and leases: hold a cost now, settle or release it later.
//
// Reservations: a cost known only afterwards is reserved as an estimate and settled at the actual
// cost (docs/reservations.md is the contract).

#include <floodgate/decision.h>
#include <floodgate/policy.h>
#include <floodgate/time.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace floodgate {

// How long a reservation waits for its settle when the caller does not say, and the
// range it may be given. Unsettled, it expires charged at the estimate.
inline constexpr std::chrono::microseconds kDefaultHold = std::chrono::minutes(5);
inline constexpr std::chrono::microseconds kMinHold = std::chrono::milliseconds(1);
inline constexpr std::chrono::microseconds kMaxHold = std::chrono::hours(24);
// Reservation ids are opaque strings of at most this many bytes: a Redis lease's id
// carries its key (docs/leases.md), base64url: 683 bytes for a key of kMaxKeyBytes, and
// a dot and its member, at most 53 more.
inline constexpr std::size_t kMaxReservationIdBytes = 768;
// How long a prefetch lease lives unless the policy says otherwise (prefetch_ttl).
inline constexpr std::chrono::microseconds kDefaultTakeLifetime = std::chrono::milliseconds(100);

struct ReserveRequest {
  std::string_view key;  // 1..kMaxKeyBytes bytes, binary-safe
  Policy policy;
  std::int64_t estimate = 1;                      // 1..kMaxCost: decided as the cost of a Check
  std::chrono::microseconds hold = kDefaultHold;  // kMinHold..kMaxHold
  // Decision time; the store's own clock when unset.
  std::optional<TimePoint> now;
};

struct Reservation {
  // The decision at cost = estimate (for a Take, at cost = units). Only an allowed
  // decision holds a reservation.
  Decision decision;
  std::string id;     // empty when denied
  TimePoint expires;  // when an unsettled reservation stops being settleable
  // The units charged and held: a Reserve's estimate, a Take's k' (0 when nothing is held).
  std::int64_t units = 0;
};

// take(k, δ) (docs/algorithms.md "Take up to k"): leases the largest k' <= up_to units that
// one instance may spend, whenever it likes, within `lifetime`, without any instance's
// spending ever exceeding the policy. The k' units are charged at once; settling the
// reservation at what was used returns the rest. Answers:
//  - units > 0: allowed, `id` holds the lease until `expires` (never past the window's end
//    for the window algorithms);
//  - units == 0, decision denied: denied as a cost-1 request at `now` would be;
//  - units == 0, decision allowed: no lease can be taken now, and the decision is the key's
//    peek (nothing charged): the policy and lifetime leave none (gcra with lifetime > its
//    burst tolerance minus one emission interval, token_bucket whose capacity leaves < 1
//    after the lifetime's refill), or the key has room for a request but not for a lease
//    (docs/prefetch.md): decide per request.
struct TakeRequest {
  std::string_view key;  // 1..kMaxKeyBytes bytes, binary-safe
  Policy policy;         // any algorithm but concurrency
  std::int64_t up_to = 1;                                  // k: 1..kMaxCost
  std::chrono::microseconds lifetime = kDefaultTakeLifetime;  // δ: kMinHold..kMaxHold
  // Decision time; the store's own clock when unset.
  std::optional<TimePoint> now;
};

struct SettleRequest {
  std::string_view id;
  std::int64_t actual = 0;  // 0..kMaxCost: the cost the request really had
  std::optional<TimePoint> now;
};

// Leases (docs/leases.md): a concurrency policy (`concurrency:N[,lease=30s]`) admits an
// Acquire while fewer than N of its leases are held; Release frees one, and a lease not
// released frees itself after the lease time. A lease is a reservation of 1 held for the
// lease time, and its release settles it at 0: the ids, bounds and errors are the
// reservations'.
struct AcquireRequest {
  std::string_view key;  // 1..kMaxKeyBytes bytes, binary-safe
  Policy policy;         // Algorithm::kConcurrency
  std::optional<TimePoint> now;
};

// decision: remaining = N - held after it; a denial's retry_after is the earliest lease
// expiry (a release may come sooner). id: empty when denied. expires: when the lease
// frees itself.
using Lease = Reservation;

struct ReleaseRequest {
  std::string_view id;
  std::optional<TimePoint> now;
};

// The reservation an Acquire is.
inline ReserveRequest LeaseReservation(const AcquireRequest& request) {
  return ReserveRequest{request.key, request.policy, 1, request.policy.period, request.now};
}

}  // namespace floodgate

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

struct ReserveRequest {
  std::string_view key;  // 1..kMaxKeyBytes bytes, binary-safe
  Policy policy;
  std::int64_t estimate = 1;                      // 1..kMaxCost: decided as the cost of a Check
  std::chrono::microseconds hold = kDefaultHold;  // kMinHold..kMaxHold
  // Decision time; the store's own clock when unset.
  std::optional<TimePoint> now;
};

struct Reservation {
  // The decision at cost = estimate. Only an allowed decision holds a reservation.
  Decision decision;
  std::string id;     // empty when denied
  TimePoint expires;  // when an unsettled reservation stops being settleable
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

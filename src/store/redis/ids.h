#pragma once

// Reservation and lease ids (docs/reservations.md, docs/leases.md): made and parsed here.

#include <absl/random/random.h>
#include <absl/status/statusor.h>
#include <floodgate/policy.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace floodgate::redis {

// The generator of one store's random id parts, seeded from the OS (std::random_device:
// RDRAND or getrandom) instead of absl's process-wide seed pool. A process forked after
// that pool was first used inherits it, so every child's new absl::BitGen draws the same
// numbers: forked workers on one Redis then minted the same reservation ids and lease
// members, and one worker's return settled another's live lease (a 200 ms window counted
// 117 admissions of 100, tests/redis_prefetch_test.cc).
absl::BitGen IdGenerator();

// A reservation id: the limit key's slot (4 hex digits) and 16 random ones. Its record
// lives at <prefix>res:{<a tag of that slot>}:<random>, on the limit key's node.
std::string ReservationId(int slot, std::uint64_t random);
std::string RecordKey(std::string_view prefix, int slot, std::uint64_t random);

// A lease's random part, as lua/concurrency.lua puts it in the lease's member.
std::string LeaseRandom(std::uint64_t random);

// A lease's id: the caller's key (base64url, unpadded: keys are binary), a dot, and the
// lease's member in its key (lua/concurrency.lua: 16 random hex digits, T, N and the
// acquire time, dot-separated). The release needs nothing else, so no record is kept:
// the member is found by its ZREM or the lease is not held. At most
// kMaxReservationIdBytes (include/floodgate/reservation.h).
std::string LeaseId(std::string_view key, std::string_view random, const Policy& policy,
                    std::int64_t acquired_at);

// What a settle names: a lease (its key and member) or a reservation's record.
struct LeaseRef {
  std::string key;
  std::string member;
};
struct ReservationRef {
  int slot = 0;
  std::uint64_t random = 0;
};
using SettleTarget = std::variant<LeaseRef, ReservationRef>;

// NotFound for an id this store did not make (forged, truncated, or not ours).
absl::StatusOr<SettleTarget> ParseSettleId(std::string_view id);

}  // namespace floodgate::redis

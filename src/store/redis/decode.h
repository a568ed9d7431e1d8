#pragma once

// What a decision script's reply means, checked before it is believed.
//
// layout::kDecisionReply's integers per decision, as lua/common.lua's FG.result returns them;
// layout::kOperationReply's per reservation operation (script_layout.h). Pure, so that any reply
// a server (or an attacker between us and it) can send is fuzzed.

#include <absl/status/statusor.h>
#include <floodgate/decision.h>
#include <hiredis/hiredis.h>

#include <cstdint>
#include <span>
#include <vector>

namespace floodgate::redis {

struct DecodedReply {
  std::vector<absl::StatusOr<Decision>> decisions;
  std::int64_t clock_us = 0;  // the batch script's server clock (0: it read none)
};

// One entry per decision (`limits[i]` is decision i's policy limit). An error for the
// whole reply when it is not an array of 4 (kDecisionReply) x limits.size() elements
// (and, `with_clock`, a last one, lua/batch.lua's clock, a non-negative integer); an
// error for one decision when its four are not integers or are out of range.
absl::StatusOr<DecodedReply> DecodeDecisions(const redisReply& reply,
                                             std::span<const std::int64_t> limits, bool with_clock);

// One operation of lua/reservation.lua's reply: its decision, and for an admitted acquire
// the lease's acquire time (µs, the end of its member; 0 for any other).
struct ReservationAnswer {
  absl::StatusOr<Decision> decision;
  std::int64_t acquired_at = 0;
};

// lua/reservation.lua's reply: layout::kOperationReply per operation (the last, an admitted
// acquire's time or a take's units), then the clock. Outcome 0 (no
// such record or lease) and 2 (its hold or lease time had ended) are NotFound, 3 (a lease
// settled at a cost) InvalidArgument; values out of range an error for that one.
absl::StatusOr<std::vector<ReservationAnswer>> DecodeReservations(const redisReply& reply,
                                                                  std::size_t operations);

// lua/upstream.lua's reply: the count after per counter, a non-negative integer (an error for
// that one otherwise); an error for the whole reply when it is not an array of `counters`.
absl::StatusOr<std::vector<absl::StatusOr<std::int64_t>>> DecodeCounts(const redisReply& reply,
                                                                      std::size_t counters);

}  // namespace floodgate::redis

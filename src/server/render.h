#pragma once

// What the service answers about decisions: Decision and MultiDecision JSON, the
// rate-limit and held-id headers, and store errors as HTTP errors.

#include <absl/status/status.h>
#include <floodgate/decision.h>
#include <floodgate/multi.h>

#include <span>
#include <string>
#include <string_view>

#include "server/decider.h"
#include "server/http_message.h"
#include "server/request_limits.h"

namespace floodgate::server {

// What a decision holds, as /v1/authz and /v1/check answer it and as the settle hook
// takes it back (docs/leases.md, "Behind nginx or Envoy"): ids, comma-separated; and the
// actual cost the hook settles the reservations at.
inline constexpr std::string_view kLeaseHeader = "X-RateLimit-Lease";
inline constexpr std::string_view kReservationHeader = "X-RateLimit-Reservation";
inline constexpr std::string_view kActualHeader = "X-RateLimit-Actual";

// A string as JSON (invalid UTF-8 replaced).
std::string JsonString(std::string_view text);

// The names of some items, as a JSON array.
std::string NamesJson(const RequestLimits& limits, std::span<const std::size_t> indexes);

// /v1/check's answer: the Decision JSON of a single limit; for several, the Decision JSON
// clients read (the binding item's, with the combined wait) and what each limit said.
std::string CheckJson(const RequestLimits& limits, const LimitsDecision& decision);

// The rate-limit headers of the answer; for several limits, also the ids of what the
// decision holds (X-RateLimit-Lease, X-RateLimit-Reservation), for the settle hook.
void AddLimitHeaders(Response& response, const RequestLimits& limits,
                     const LimitsDecision& decision);

// The HTTP answer to a store's refusal of a reservation call.
Response StoreError(Reply reply, const absl::Status& status);

}  // namespace floodgate::server

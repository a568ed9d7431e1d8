#pragma once

// What the service answers about decisions: JSON, headers, and store errors as HTTP errors.
//
// Decision and MultiDecision JSON, the rate-limit and held-id headers.

#include <absl/status/status.h>
#include <floodgate/decision.h>
#include <floodgate/multi.h>

#include <span>
#include <string>
#include <string_view>
#include <utility>

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

// The HTTP status and error code of a store's error, one mapping for every endpoint:
// 400 invalid_argument (the request, as the store validates it), 403 permission_denied
// (what the config does not allow), 404 not_found (an id unknown, settled or expired),
// 503 resource_exhausted (the store holds as many reservations as it may), 501
// unimplemented (a store without reservations), 503 unavailable (the store did not
// answer in time, is unreachable or closing: retry later), else 500 internal.
std::pair<http::status, std::string_view> HttpStatusOf(absl::StatusCode code);

// A store's error as the HTTP error HttpStatusOf() names, its message the status's.
Response StoreError(Reply reply, const absl::Status& status);

}  // namespace floodgate::server

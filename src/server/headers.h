#pragma once

// The rate-limit response headers, formatted in one place for every endpoint.
//
// docs/service.md, "Rate-limit headers": X-RateLimit-*, IETF RateLimit-Policy/RateLimit, and
// Retry-After on denial.

#include <floodgate/decision.h>
#include <floodgate/policy.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace floodgate::server {

using HeaderList = std::vector<std::pair<std::string_view, std::string>>;

// Whole seconds, rounded up (a client that waits that long is never early).
std::int64_t CeilSeconds(std::chrono::microseconds us);

HeaderList RateLimitHeaders(std::string_view policy_name, const Policy& policy,
                            const Decision& decision);

// The same headers for a decision over several limits: X-RateLimit-* and Retry-After from
// `binding` (the binding limit's decision with the combined wait), RateLimit-Policy and
// RateLimit as built by AppendRateLimitFields.
HeaderList RateLimitHeaders(const Decision& binding, std::string policy_field,
                            std::string limit_field);

// Appends one limit to the values of RateLimit-Policy and RateLimit, which list several
// limits comma-separated (the IETF draft allows it).
void AppendRateLimitFields(std::string& policy_field, std::string& limit_field,
                           std::string_view name, const Policy& policy, const Decision& decision);

}  // namespace floodgate::server

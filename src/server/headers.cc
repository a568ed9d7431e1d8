#include "server/headers.h"

#include <fmt/format.h>

namespace floodgate::server {

std::int64_t CeilSeconds(std::chrono::microseconds us) {
  return us.count() <= 0 ? 0 : (us.count() + 999'999) / 1'000'000;
}

HeaderList RateLimitHeaders(std::string_view policy_name, const Policy& policy,
                            const Decision& decision) {
  const std::int64_t reset = CeilSeconds(decision.reset_after);
  // The IETF fields quote the policy name as a structured-field string: escape '\' and '"'.
  std::string quoted;
  for (char c : policy_name) {
    if (c == '\\' || c == '"') quoted += '\\';
    quoted += c;
  }
  HeaderList headers = {
      {"X-RateLimit-Limit", std::to_string(decision.limit)},
      {"X-RateLimit-Remaining", std::to_string(decision.remaining)},
      {"X-RateLimit-Reset", std::to_string(reset)},
      {"RateLimit-Policy", fmt::format("\"{}\";q={};w={}", quoted, decision.limit,
                                       std::max<std::int64_t>(1, CeilSeconds(policy.period)))},
      {"RateLimit", fmt::format("\"{}\";r={};t={}", quoted, decision.remaining, reset)},
  };
  // A cost that can never fit has no retry time worth sending (retry_after = -1).
  if (!decision.allowed && decision.retry_after.count() >= 0) {
    headers.emplace_back("Retry-After", std::to_string(CeilSeconds(decision.retry_after)));
  }
  return headers;
}

}  // namespace floodgate::server

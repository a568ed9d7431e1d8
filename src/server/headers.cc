#include "server/headers.h"

#include <fmt/format.h>

namespace floodgate::server {

std::int64_t CeilSeconds(std::chrono::microseconds us) {
  return us.count() <= 0 ? 0 : (us.count() + 999'999) / 1'000'000;
}

namespace {

// The IETF fields quote the policy name as a structured-field string: escape '\' and '"'.
std::string Quoted(std::string_view name) {
  std::string quoted;
  for (char c : name) {
    if (c == '\\' || c == '"') quoted += '\\';
    quoted += c;
  }
  return quoted;
}

}  // namespace

void AppendRateLimitFields(std::string& policy_field, std::string& limit_field,
                           std::string_view name, const Policy& policy, const Decision& decision) {
  const std::string quoted = Quoted(name);
  if (!policy_field.empty()) policy_field += ", ";
  if (!limit_field.empty()) limit_field += ", ";
  policy_field += fmt::format("\"{}\";q={};w={}", quoted, decision.limit,
                              std::max<std::int64_t>(1, CeilSeconds(policy.period)));
  limit_field += fmt::format("\"{}\";r={};t={}", quoted, decision.remaining,
                             CeilSeconds(decision.reset_after));
}

HeaderList RateLimitHeaders(std::string_view policy_name, const Policy& policy,
                            const Decision& decision) {
  std::string policy_field, limit_field;
  AppendRateLimitFields(policy_field, limit_field, policy_name, policy, decision);
  HeaderList headers = {
      {"X-RateLimit-Limit", std::to_string(decision.limit)},
      {"X-RateLimit-Remaining", std::to_string(decision.remaining)},
      {"X-RateLimit-Reset", std::to_string(CeilSeconds(decision.reset_after))},
      {"RateLimit-Policy", std::move(policy_field)},
      {"RateLimit", std::move(limit_field)},
  };
  // A cost that can never fit has no retry time worth sending (retry_after = -1).
  if (!decision.allowed && decision.retry_after.count() >= 0) {
    headers.emplace_back("Retry-After", std::to_string(CeilSeconds(decision.retry_after)));
  }
  return headers;
}

}  // namespace floodgate::server

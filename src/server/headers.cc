// The rate-limit response headers, formatted in one place for every endpoint.

#include "server/headers.h"

#include <fmt/format.h>

#include <algorithm>

namespace floodgate::server {

std::int64_t CeilSeconds(std::chrono::microseconds us) {
  return us.count() <= 0 ? 0 : (us.count() + 999'999) / 1'000'000;
}

namespace {

// The IETF fields quote the policy name as a structured-field string: escape '\' and '"'.
// An sf-string holds printable ASCII only; anything else (names are checked where they
// come in) is left out rather than written into a header.
void AppendQuoted(std::string& out, std::string_view name) {
  out += '"';
  const bool plain = std::all_of(name.begin(), name.end(), [](char c) {
    return c >= 0x20 && c <= 0x7e && c != '\\' && c != '"';
  });
  if (plain) {
    out += name;
  } else {
    for (char c : name) {
      if (c < 0x20 || c > 0x7e) continue;
      if (c == '\\' || c == '"') out += '\\';
      out += c;
    }
  }
  out += '"';
}

void AppendInt(std::string& out, std::int64_t value) {
  const fmt::format_int digits(value);
  out.append(digits.data(), digits.size());
}

std::string IntString(std::int64_t value) { return fmt::format_int(value).str(); }

}  // namespace

// Every answer carries these headers, so they are appended straight into their strings:
// with fmt::format and a quoted copy of the name per field they measured ~4,000
// instructions per limit, more than deciding it.
void AppendRateLimitFields(std::string& policy_field, std::string& limit_field,
                           std::string_view name, const Policy& policy, const Decision& decision) {
  if (!policy_field.empty()) policy_field += ", ";
  if (!limit_field.empty()) limit_field += ", ";
  AppendQuoted(policy_field, name);
  policy_field += ";q=";
  AppendInt(policy_field, decision.limit);
  policy_field += ";w=";
  AppendInt(policy_field, std::max<std::int64_t>(1, CeilSeconds(policy.period)));
  AppendQuoted(limit_field, name);
  limit_field += ";r=";
  AppendInt(limit_field, decision.remaining);
  limit_field += ";t=";
  AppendInt(limit_field, CeilSeconds(decision.reset_after));
}

HeaderList RateLimitHeaders(std::string_view policy_name, const Policy& policy,
                            const Decision& decision) {
  std::string policy_field, limit_field;
  AppendRateLimitFields(policy_field, limit_field, policy_name, policy, decision);
  return RateLimitHeaders(decision, std::move(policy_field), std::move(limit_field));
}

HeaderList RateLimitHeaders(const Decision& binding, std::string policy_field,
                            std::string limit_field) {
  HeaderList headers;
  headers.reserve(6);
  headers.emplace_back("X-RateLimit-Limit", IntString(binding.limit));
  headers.emplace_back("X-RateLimit-Remaining", IntString(binding.remaining));
  headers.emplace_back("X-RateLimit-Reset", IntString(CeilSeconds(binding.reset_after)));
  headers.emplace_back("RateLimit-Policy", std::move(policy_field));
  headers.emplace_back("RateLimit", std::move(limit_field));
  // A cost that can never fit has no retry time worth sending (retry_after = -1).
  if (!binding.allowed && binding.retry_after.count() >= 0) {
    headers.emplace_back("Retry-After", IntString(CeilSeconds(binding.retry_after)));
  }
  return headers;
}

}  // namespace floodgate::server

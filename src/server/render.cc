// What the service answers about decisions: Decision JSON, headers, store errors.

#include "server/render.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "server/headers.h"

namespace floodgate::server {

namespace {

std::string Dump(const nlohmann::json& json) {
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// RateLimit-Policy and RateLimit list every enforced limit the store answered for (a
// shadow limit is rolled out silently: when every limit is a shadow, no header at all);
// X-RateLimit-* and Retry-After follow the binding item and the combined wait
// (docs/multi.md).
HeaderList MultiRateLimitHeaders(const RequestLimits& limits, const MultiDecision& decision) {
  if (limits.items[decision.binding].shadow) return {};
  std::string policy_field, limit_field;
  for (std::size_t i = 0; i < limits.items.size(); ++i) {
    if (limits.items[i].shadow ||
        std::find(decision.unknown.begin(), decision.unknown.end(), i) != decision.unknown.end()) {
      continue;
    }
    AppendRateLimitFields(policy_field, limit_field, limits.names[i], limits.items[i].policy,
                          decision.items[i]);
  }
  return RateLimitHeaders(decision.Summary(), std::move(policy_field), std::move(limit_field));
}

// /v1/check's answer to several limits: the Decision JSON clients read (the binding
// item's, with the combined wait) and what each limit said.
std::string MultiJson(const RequestLimits& limits, const MultiDecision& decision) {
  std::string json = ToJson(decision.Summary());
  json.pop_back();  // the closing brace
  json += fmt::format(R"(,"denied_by":{})", NamesJson(limits, decision.denied_by));
  if (!decision.would_deny.empty()) {
    json += fmt::format(R"(,"would_deny":{})", NamesJson(limits, decision.would_deny));
  }
  json += R"(,"items":[)";
  for (std::size_t i = 0; i < decision.items.size(); ++i) {
    json += i == 0 ? "" : ",";
    // An item the store was not asked about (a cached denial of another item) has no
    // decision of its own: say so instead of showing zeros a client could act on.
    if (std::find(decision.unknown.begin(), decision.unknown.end(), i) != decision.unknown.end()) {
      json += fmt::format(R"({{"name":{},"consulted":false}})", Dump(limits.names[i]));
      continue;
    }
    std::string item = ToJson(decision.items[i]);
    item.insert(1, fmt::format(R"("name":{},"consulted":true,)", Dump(limits.names[i])));
    for (const HeldReservation& held : decision.held) {
      if (held.item != i) continue;
      const bool lease = limits.items[i].policy.algorithm == Algorithm::kConcurrency;
      item.pop_back();
      item += fmt::format(R"(,"{}":{},"{}":{}}})", lease ? "lease" : "reservation", Dump(held.id),
                          lease ? "lease_us" : "hold_us", HoldOf(limits.items[i]).count());
    }
    json += item;
  }
  return json + "]}";
}

// What a multi-decision holds, for the proxy to hand back to the settle hook
// (docs/leases.md, "Behind nginx or Envoy"): leases in X-RateLimit-Lease, reservations
// in X-RateLimit-Reservation, each a comma-separated list of ids.
void AddHeldHeaders(Response& response, const RequestLimits& limits,
                    const MultiDecision& decision) {
  std::string leases, reservations;
  for (const HeldReservation& held : decision.held) {
    std::string& ids =
        limits.items[held.item].policy.algorithm == Algorithm::kConcurrency ? leases : reservations;
    if (!ids.empty()) ids += ", ";
    ids += held.id;
  }
  if (!leases.empty()) response.headers.emplace_back(kLeaseHeader, std::move(leases));
  if (!reservations.empty()) {
    response.headers.emplace_back(kReservationHeader, std::move(reservations));
  }
}

}  // namespace

std::string JsonString(std::string_view text) { return Dump(std::string(text)); }

std::string NamesJson(const RequestLimits& limits, std::span<const std::size_t> indexes) {
  nlohmann::json names = nlohmann::json::array();
  for (std::size_t i : indexes) names.push_back(limits.names[i]);
  return Dump(names);
}

std::string CheckJson(const RequestLimits& limits, const LimitsDecision& decision) {
  if (const Decision* single = decision.single()) return ToJson(*single);
  return MultiJson(limits, *decision.multi());
}

void AddLimitHeaders(Response& response, const RequestLimits& limits,
                     const LimitsDecision& decision) {
  if (const Decision* single = decision.single()) {
    const CheckItem& item = limits.items.front();
    return AddHeaders(response, RateLimitHeaders(item.name, item.policy, *single));
  }
  AddHeaders(response, MultiRateLimitHeaders(limits, *decision.multi()));
  AddHeldHeaders(response, limits, *decision.multi());
}

std::pair<http::status, std::string_view> HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
      return {http::status::bad_request, "invalid_argument"};
    case absl::StatusCode::kNotFound:
      return {http::status::not_found, "not_found"};
    case absl::StatusCode::kPermissionDenied:
      return {http::status::forbidden, "permission_denied"};
    case absl::StatusCode::kResourceExhausted:
      return {http::status::service_unavailable, "resource_exhausted"};
    case absl::StatusCode::kUnimplemented:
      return {http::status::not_implemented, "unimplemented"};
    // The store did not answer in time, cannot be reached, or is closing: the request
    // was fine and may succeed when retried.
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
      return {http::status::service_unavailable, "unavailable"};
    default:
      return {http::status::internal_server_error, "internal"};
  }
}

Response StoreError(Reply reply, const absl::Status& status) {
  const auto [code, name] = HttpStatusOf(status.code());
  return ErrorResponse(reply, code, name, MessageOf(status));
}

}  // namespace floodgate::server

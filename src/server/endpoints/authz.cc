// /v1/authz: the rules the original request matches, decided for its client.

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "server/endpoints/endpoints.h"
#include "server/render.h"
#include "server/request_limits.h"

namespace floodgate::server::endpoints {

namespace {

// An admission with a delay (docs/http.md, "Waiting"): 204 once the delay has passed, as
// nginx's limit_req delay= holds a request; with no place left among max_waiting, a 429
// that says why (the request stays charged: its slot was taken when it was decided).
Response Held(const Reply& reply, const RequestLimits& limits, const LimitsDecision& decision,
              std::shared_ptr<const void> place) {
  if (place == nullptr) {
    Response full = MakeResponse(
        reply, http::status::too_many_requests,
        R"({"status": 429, "code": "rate_limit:too_many_waiting", "message": "max_waiting )"
        R"(requests are already held for their delay; the request stays charged"})",
        "application/json");
    AddLimitHeaders(full, limits, decision);
    return full;
  }
  Response response = MakeResponse(reply, http::status::no_content, "", "text/plain");
  AddLimitHeaders(response, limits, decision);
  if (!limits.issued_cookie.empty())
    response.headers.emplace_back("Set-Cookie", limits.issued_cookie);
  response.hold = decision.delay();
  response.place = std::move(place);
  return response;
}

}  // namespace

std::shared_ptr<const void> WaitingPlaces::Take(std::int64_t max) {
  if (count_->fetch_add(1, std::memory_order_relaxed) >= max) {
    count_->fetch_sub(1, std::memory_order_relaxed);
    return nullptr;
  }
  return std::shared_ptr<const void>(count_.get(), [count = count_](const void*) {
    count->fetch_sub(1, std::memory_order_relaxed);
  });
}

void Authz(const Request& request, const boost::asio::ip::address& peer, const ServerConfig& config,
           Decider& decider, WaitingPlaces& waiting, Respond respond) {
  const std::string_view target = TargetOf(request);
  std::string_view original_uri = HeaderValue(request, "X-Original-URI");
  if (original_uri.empty()) original_uri = HeaderValue(request, "X-Forwarded-Uri");
  std::string_view method = HeaderValue(request, "X-Original-Method");
  if (method.empty()) method = HeaderValue(request, "X-Forwarded-Method");
  if (method.empty()) method = {request.method_string().data(), request.method_string().size()};
  std::string upper(method);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  const std::string_view path = PathOf(original_uri.empty() ? target : original_uri);

  const std::vector<const Rule*> rules = config.MatchAll(upper, path);
  if (rules.empty()) {
    return respond(MakeResponse(request, http::status::no_content, "", "text/plain"));
  }
  auto limits = std::make_shared<RequestLimits>();
  AddAuthzLimits(rules, request, ClientAddress(request, peer, config), config, *limits);
  const int deny_status =
      QueryParam(target, "deny_status") == "403" ? 403 : config.authz_deny_status;
  decider.DecideLimits(
      std::move(limits), [reply = Reply::To(request), deny_status, &waiting,
                          max_waiting = config.max_waiting, respond = std::move(respond)](
                             const RequestLimits& limits, absl::StatusOr<LimitsDecision> decision) {
        if (!decision.ok()) return respond(StoreError(reply, decision.status()));
        if (decision->allowed() && decision->delay().count() > 0) {
          return respond(Held(reply, limits, *decision, waiting.Take(max_waiting)));
        }
        // A single limit denies by itself.
        static constexpr std::size_t kFirst[] = {0};
        const MultiDecision* multi = decision->multi();
        const std::span<const std::size_t> denied_by =
            multi != nullptr ? std::span<const std::size_t>(multi->denied_by) : kFirst;
        Response response =
            decision->allowed()
                ? MakeResponse(reply, http::status::no_content, "", "text/plain")
                : MakeResponse(reply, static_cast<http::status>(deny_status),
                               fmt::format(R"({{"status": 429, "code": "rate_limit:exceeded", )"
                                           R"("denied_by": {}}})",
                                           NamesJson(limits, denied_by)),
                               "application/json");
        AddLimitHeaders(response, limits, *decision);
        if (!limits.issued_cookie.empty()) {
          response.headers.emplace_back("Set-Cookie", limits.issued_cookie);
        }
        respond(std::move(response));
      });
}

}  // namespace floodgate::server::endpoints

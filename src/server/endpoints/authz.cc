// /v1/authz: the rules the original request matches, decided for its client.

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "server/endpoints/endpoints.h"
#include "server/render.h"
#include "server/request_limits.h"

namespace floodgate::server::endpoints {

void Authz(const Request& request, const boost::asio::ip::address& peer, const ServerConfig& config,
           Decider& decider, Respond respond) {
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
      std::move(limits), [reply = Reply::To(request), deny_status, respond = std::move(respond)](
                             const RequestLimits& limits, absl::StatusOr<LimitsDecision> decision) {
        if (!decision.ok()) return respond(StoreError(reply, decision.status()));
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

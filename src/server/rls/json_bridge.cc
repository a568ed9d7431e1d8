// POST /json: upstream's HTTP front end of Envoy's rate limit service, protobuf JSON.

#include "server/rls/json_bridge.h"

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

#include <memory>

#include "common/strings.h"
#include "server/rls/engine.h"

namespace floodgate::server::rls {

void ServeJson(Engine& engine, const Request& request, Respond respond) {
  // The messages live until the engine answers, maybe on the store's thread.
  struct Call {
    pb::RateLimitRequest request;
    pb::RateLimitResponse response;
  };
  auto call = std::make_unique<Call>();
  const Reply reply = Reply::To(request);
  // As upstream: 400 for a body that is not a RateLimitRequest (protojson refuses unknown
  // fields) and for a bad request; 429 for OVER_LIMIT; 500 for UNKNOWN. A store failure
  // under on_error=error is a 503 here (upstream has no such answer).
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(request.body().data(), request.body().size()), &call->request);
  if (!parsed.ok()) {
    return respond(ErrorResponse(
        reply, http::status::bad_request, "bad_request",
        fmt::format("not a RateLimitRequest in protobuf JSON: {}",
                    std::string_view(parsed.message().data(), parsed.message().size()))));
  }
  const pb::RateLimitRequest& rls_request = call->request;
  pb::RateLimitResponse* rls_response = &call->response;
  engine.ShouldRateLimit(
      rls_request, rls_response,
      [call = std::move(call), reply, respond = std::move(respond)](absl::Status status) mutable {
        if (!status.ok()) {
          const bool unavailable = absl::IsUnavailable(status);
          return respond(ErrorResponse(
              reply, unavailable ? http::status::service_unavailable : http::status::bad_request,
              unavailable ? "unavailable" : "bad_request", MessageOf(status)));
        }
        std::string body;
        if (!google::protobuf::util::MessageToJsonString(call->response, &body).ok()) {
          return respond(ErrorResponse(reply, http::status::internal_server_error, "internal",
                                       "the RateLimitResponse did not serialise"));
        }
        http::status code = http::status::ok;
        if (call->response.overall_code() == pb::RateLimitResponse::OVER_LIMIT) {
          code = http::status::too_many_requests;
        } else if (call->response.overall_code() == pb::RateLimitResponse::UNKNOWN) {
          code = http::status::internal_server_error;
        }
        respond(MakeResponse(reply, code, std::move(body), "application/json"));
      });
}

}  // namespace floodgate::server::rls

// POST /json: upstream's HTTP front end of Envoy's rate limit service, protobuf JSON.

#include "server/rls/json_bridge.h"

#include <absl/container/flat_hash_set.h>
#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>
#include <simdjson.h>

#include <memory>
#include <optional>

#include "common/strings.h"
#include "server/request_fields.h"
#include "server/rls/engine.h"

namespace floodgate::server::rls {

namespace {

// A field's name as protobuf's JSON parser reads it: the JSON name ("hitsAddend") and the
// proto name ("hits_addend") are the same field.
std::string ProtoName(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 4);
  for (const char c : name) {
    if (c >= 'A' && c <= 'Z') {
      out += '_';
      out += static_cast<char>(c - 'A' + 'a');
    } else {
      out += c;
    }
  }
  return out;
}

// The first field given twice in one object, anywhere in `element`, with where it is
// ("descriptors[0].entries[1]: field ..."). protobuf's JSON parser keeps the last of two (so
// "domain":"a","domain":"b" meant b), where every other unknown or misplaced field is
// refused. Linear in the body (bounded by the HTTP body limit); the depth is simdjson's.
std::optional<std::string> DuplicateField(simdjson::dom::element element, const std::string& at);

std::optional<std::string> DuplicateInObject(simdjson::dom::object object, const std::string& at) {
  absl::flat_hash_set<std::string> seen;
  for (const auto field : object) {
    const std::string_view name = field.key;
    if (!seen.insert(ProtoName(name)).second) {
      return fmt::format("{}{}field \"{}\" given twice", at, at.empty() ? "" : ": ", name);
    }
    const std::string inner_at = at.empty() ? std::string(name) : fmt::format("{}.{}", at, name);
    if (auto inner = DuplicateField(field.value, inner_at)) return inner;
  }
  return std::nullopt;
}

std::optional<std::string> DuplicateField(simdjson::dom::element element, const std::string& at) {
  simdjson::dom::object object;
  if (element.get_object().get(object) == simdjson::SUCCESS) {
    return DuplicateInObject(object, at);
  }
  simdjson::dom::array array;
  if (element.get_array().get(array) == simdjson::SUCCESS) {
    std::size_t i = 0;
    for (const simdjson::dom::element item : array) {
      if (auto inner = DuplicateField(item, fmt::format("{}[{}]", at, i++))) return inner;
    }
  }
  return std::nullopt;
}

}  // namespace

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
  if (const auto object = ParseObject(request.body()); object.ok()) {
    if (auto duplicate = DuplicateInObject(*object, "")) {
      return respond(ErrorResponse(reply, http::status::bad_request, "bad_request",
                                   fmt::format("not a RateLimitRequest: {}", *duplicate)));
    }
  }
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

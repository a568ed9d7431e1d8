// The HTTP API's routing table (docs/service.md, "HTTP API") and its config reload.

#include "server/service.h"

#include <floodgate/version.h>
#include <fmt/format.h>

#include "server/endpoints/endpoints.h"
#include "server/rls/engine.h"
#include "server/rls/json_bridge.h"
#include "server/web_sources.h"

namespace floodgate::server {

namespace {

namespace ip = boost::asio::ip;

std::string HtmlEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The operation of a /v1/keys/... path (docs/http.md, "Operating a key").
std::optional<KeyOperation> KeyOperationAt(std::string_view path) {
  if (path == "/v1/keys/reset") return KeyOperation::kReset;
  if (path == "/v1/keys/refund") return KeyOperation::kRefund;
  if (path == "/v1/keys/penalize") return KeyOperation::kPenalize;
  return std::nullopt;
}

std::string Replace(std::string text, std::string_view from, std::string_view to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
    text.replace(at, from.size(), to);
    at += to.size();
  }
  return text;
}

}  // namespace

Service::Service(std::shared_ptr<Store> store, std::shared_ptr<const ServerConfig> config)
    : store_(std::move(store)), config_(std::move(config)), id_([] {
        static std::atomic<std::uint64_t> next{1};
        return next.fetch_add(1);
      }()) {
  demo_page_ = Replace(std::string(web::k_index_html), "__FLOODGATE_STORE__",
                       HtmlEscape(store_->Describe()));
  demo_page_ = Replace(std::move(demo_page_), "__FLOODGATE_VERSION__", kVersion);
}

void Service::Reload(std::shared_ptr<const ServerConfig> config) {
  config_.store(std::move(config));
  config_generation_.fetch_add(1, std::memory_order_release);
}

const ServerConfig& Service::CurrentConfig() {
  struct Cache {
    std::uint64_t service = 0;
    std::uint64_t generation = 0;
    std::shared_ptr<const ServerConfig> config;
  };
  thread_local Cache cache;
  const std::uint64_t generation = config_generation_.load(std::memory_order_acquire);
  if (cache.service != id_ || cache.generation != generation || !cache.config) {
    cache = {id_, generation, config_.load()};
  }
  return *cache.config;
}

void Service::Handle(const Request& request, const ip::address& peer, Respond respond) {
  const ServerConfig& config = CurrentConfig();
  const std::string_view path = PathOf(TargetOf(request));
  if (path == "/v1/check" || path == "/v1/reserve" || path == "/v1/settle" ||
      path == "/v1/acquire" || path == "/v1/release") {
    if (request.method() != http::verb::post) {
      Response r = ErrorResponse(request, http::status::method_not_allowed, "method_not_allowed",
                                 fmt::format("{} takes POST", path));
      r.headers.emplace_back("Allow", "POST");
      return respond(std::move(r));
    }
    using endpoints::Holding;
    if (path == "/v1/reserve") {
      return endpoints::Reserve(request, config, Holding::kReservation, decider_,
                                std::move(respond));
    }
    if (path == "/v1/settle") {
      return endpoints::Settle(request, Holding::kReservation, decider_, std::move(respond));
    }
    if (path == "/v1/acquire") {
      return endpoints::Reserve(request, config, Holding::kLease, decider_, std::move(respond));
    }
    if (path == "/v1/release") {
      return endpoints::Settle(request, Holding::kLease, decider_, std::move(respond));
    }
    return endpoints::Check(request, config, decider_, std::move(respond));
  }
  if (const std::optional<KeyOperation> operation = KeyOperationAt(path)) {
    if (request.method() != http::verb::post && config.admin) {
      Response r = ErrorResponse(request, http::status::method_not_allowed, "method_not_allowed",
                                 fmt::format("{} takes POST", path));
      r.headers.emplace_back("Allow", "POST");
      return respond(std::move(r));
    }
    return endpoints::OperateKey(request, config, *operation, decider_, std::move(respond));
  }
  if (path == "/v1/authz") {
    return endpoints::Authz(request, peer, config, decider_, waiting_, std::move(respond));
  }
  // Upstream's /json takes any method (its router does not restrict it).
  if (path == "/json" && rls_ != nullptr) return rls::ServeJson(*rls_, request, std::move(respond));
  // envoyproxy/ratelimit's health endpoint, answered as it does: any method, 200 "OK", or
  // 500 with an empty body while unhealthy (draining after SIGTERM...).
  if (path == "/healthcheck") {
    if (health_ && !health_()) {
      return respond(MakeResponse(request, http::status::internal_server_error, "", "text/plain"));
    }
    return respond(MakeResponse(request, http::status::ok, "OK", "text/plain"));
  }
  const bool get = request.method() == http::verb::get || request.method() == http::verb::head;
  if (get && path == "/healthz") {
    return respond(MakeResponse(request, http::status::ok, "ok\n", "text/plain"));
  }
  if (get && path == "/readyz") {
    const bool ready = store_->Ping();
    return respond(MakeResponse(request,
                                ready ? http::status::ok : http::status::service_unavailable,
                                ready ? "ready\n" : "store unreachable\n", "text/plain"));
  }
  if (get && path == "/metrics") {
    std::string text = metrics_.Render(*store_);
    text += fmt::format(
        "# HELP floodgate_authz_waiting /v1/authz answers held for their delay (max_waiting).\n"
        "# TYPE floodgate_authz_waiting gauge\nfloodgate_authz_waiting {}\n",
        waiting_.taken());
    if (rls_ != nullptr) rls_->AppendMetrics(text);
    return respond(
        MakeResponse(request, http::status::ok, std::move(text), "text/plain; version=0.0.4"));
  }
  if (get && path == "/" && config.demo) {
    return respond(MakeResponse(request, http::status::ok, demo_page_, "text/html; charset=utf-8"));
  }
  respond(ErrorResponse(
      request, http::status::not_found, "not_found",
      fmt::format("no endpoint {} {}",
                  std::string_view(request.method_string().data(), request.method_string().size()),
                  path)));
}

}  // namespace floodgate::server

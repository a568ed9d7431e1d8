#include "server/service.h"

#include <absl/strings/ascii.h>
#include <absl/strings/str_split.h>
#include <floodgate/version.h>
#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/beast/version.hpp>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "common/strings.h"
#include "server/headers.h"
#include "server/rls/engine.h"
#include "server/web_sources.h"

namespace floodgate::server {

namespace {

namespace ip = boost::asio::ip;
using Steady = std::chrono::steady_clock;

// Rate-limited requests name their policy "policy" in the IETF headers when they came
// with an inline policy string instead of a rule.
constexpr std::string_view kInlinePolicy = "policy";

// What a decision holds, as /v1/authz and /v1/check answer it and as the settle hook
// takes it back (docs/leases.md, "Behind nginx or Envoy"): ids, comma-separated; and the
// actual cost the hook settles the reservations at.
constexpr std::string_view kLeaseHeader = "X-RateLimit-Lease";
constexpr std::string_view kReservationHeader = "X-RateLimit-Reservation";
constexpr std::string_view kActualHeader = "X-RateLimit-Actual";

// Boost 1.74's Beast speaks boost::string_view.
boost::beast::string_view BeastView(std::string_view s) { return {s.data(), s.size()}; }

Response MakeResponse(unsigned version, bool keep_alive, http::status status, std::string body,
                      std::string_view content_type) {
  Response response;
  response.status = static_cast<int>(status);
  response.version = version;
  response.keep_alive = keep_alive;
  response.content_type = content_type;
  response.body = std::move(body);
  return response;
}

Response MakeResponse(const Request& request, http::status status, std::string body,
                      std::string_view content_type) {
  Response response =
      MakeResponse(request.version(), request.keep_alive(), status, std::move(body), content_type);
  response.head = request.method() == http::verb::head;
  return response;
}

void AddHeaders(Response& response, HeaderList headers) {
  for (auto& header : headers) response.headers.push_back(std::move(header));
}

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

std::string Replace(std::string text, std::string_view from, std::string_view to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
    text.replace(at, from.size(), to);
    at += to.size();
  }
  return text;
}

std::string_view HeaderValue(const Request& request, std::string_view name) {
  const auto it = request.find(BeastView(name));
  if (it == request.end()) return {};
  return {it->value().data(), it->value().size()};
}

// The value of cookie `name` in the Cookie header, if any.
std::optional<std::string_view> CookieValue(const Request& request, std::string_view name) {
  std::optional<std::string_view> found;
  for (auto [it, end] = request.equal_range(http::field::cookie); it != end; ++it) {
    ForEachItem({it->value().data(), it->value().size()}, ';', [&](std::string_view pair) {
      const std::size_t eq = pair.find('=');
      if (!found && eq != std::string_view::npos && pair.substr(0, eq) == name) {
        found = pair.substr(eq + 1);
      }
    });
  }
  return found;
}

// Only values we could have issued count as our cookie: anything else is ignored, so
// a forged cookie cannot smuggle bytes into store keys.
bool LooksLikeUuid(std::string_view v) {
  if (v.size() != 36) return false;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (v[i] == '-')) return false;
    if (!dash && !std::isxdigit(static_cast<unsigned char>(v[i]))) return false;
  }
  return true;
}

std::string_view PathOf(std::string_view target) { return target.substr(0, target.find('?')); }

std::string_view QueryParam(std::string_view target, std::string_view name) {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos) return {};
  std::string_view found;
  (void)ForEachQueryOption(target.substr(q + 1), [&](std::string_view n, std::string_view v) {
    if (n == name) found = v;
    return absl::OkStatus();
  });
  return found;
}

}  // namespace

std::string_view Response::Header(std::string_view name) const {
  const auto same = [](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) ==
                    std::tolower(static_cast<unsigned char>(y));
           });
  };
  if (same(name, "Content-Type")) return content_type;
  for (const auto& [n, v] : headers) {
    if (same(n, name)) return v;
  }
  return {};
}

void Response::SerializeTo(std::string& out) const {
  const auto reason = http::obsolete_reason(static_cast<http::status>(status));
  out.clear();
  out.append("HTTP/1.1 ");
  out.append(std::to_string(status));
  out.push_back(' ');
  out.append(reason.data(), reason.size());
  out.append("\r\nServer: floodgate");
  // 1xx, 204 and 304 carry no body, and must not announce one (RFC 9110, 8.6).
  const bool bodiless = status < 200 || status == 204 || status == 304;
  if (!bodiless) {
    out.append("\r\nContent-Type: ");
    out.append(content_type);
    out.append("\r\nContent-Length: ");
    out.append(std::to_string(body.size()));
  }
  if (!keep_alive) {
    out.append("\r\nConnection: close");
  } else if (version < 11) {
    out.append("\r\nConnection: keep-alive");  // HTTP/1.0 closes unless told otherwise
  }
  out.append("\r\n");
  for (const auto& [name, value] : headers) {
    out.append(name);
    out.append(": ");
    out.append(value);
    out.append("\r\n");
  }
  out.append("\r\n");
  if (!head && !bodiless) out.append(body);
}

std::string NewUuidV7() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  const std::uint64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  const std::uint64_t a = random(), b = random();
  // 48-bit unix ms | version 7 | 12 random bits | variant 10 | 62 random bits.
  const std::uint64_t high = (ms << 16) | 0x7000 | (a & 0x0fff);
  const std::uint64_t low = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", high >> 32, (high >> 16) & 0xffff,
                     high & 0xffff, low >> 48, low & 0xffffffffffffULL);
}

ip::address ClientAddress(const Request& request, const ip::address& peer,
                          const ServerConfig& config) {
  if (!config.Trusted(peer)) return peer;
  // Walk X-Forwarded-For from the right: each hop appended the address it saw; the
  // first one that is not a trusted proxy is the client. All trusted: the left-most.
  std::vector<std::string_view> hops;
  for (auto [it, end] = request.equal_range("X-Forwarded-For"); it != end; ++it) {
    ForEachItem({it->value().data(), it->value().size()}, ',',  // names match in any case
                [&](std::string_view hop) { hops.push_back(hop); });
  }
  ip::address client = peer;
  for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
    boost::system::error_code ec;
    const ip::address hop = ip::make_address(std::string(*it), ec);
    if (ec) break;  // garbage: trust nothing further left
    client = hop;
    if (!config.Trusted(hop)) break;
  }
  return client;
}

Service::Service(std::shared_ptr<Store> store, std::shared_ptr<const ServerConfig> config)
    : store_(std::move(store)),
      store_answers_inline_(store_->AnswersInline()),
      config_(std::move(config)),
      id_([] {
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

Response Service::Error(const Request& request, http::status status, std::string_view code,
                        std::string_view message) {
  return Error(request.version(), request.keep_alive(), status, code, message);
}

Response Service::Error(unsigned version, bool keep_alive, http::status status,
                        std::string_view code, std::string_view message) {
  nlohmann::ordered_json body = {
      {"status", static_cast<int>(status)}, {"code", code}, {"message", message}};
  return MakeResponse(version, keep_alive, status,
                      body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace),
                      "application/json");
}

void Service::Handle(const Request& request, const ip::address& peer, Respond respond) {
  const ServerConfig& config = CurrentConfig();
  const std::string_view target(request.target().data(), request.target().size());
  const std::string_view path = PathOf(target);
  if (path == "/v1/check" || path == "/v1/reserve" || path == "/v1/settle" ||
      path == "/v1/acquire" || path == "/v1/release") {
    if (request.method() != http::verb::post) {
      Response r = Error(request, http::status::method_not_allowed, "method_not_allowed",
                         fmt::format("{} takes POST", path));
      r.headers.emplace_back("Allow", "POST");
      return respond(std::move(r));
    }
    if (path == "/v1/reserve") return Reserve(request, config, false, std::move(respond));
    if (path == "/v1/settle") return Settle(request, false, std::move(respond));
    if (path == "/v1/acquire") return Reserve(request, config, true, std::move(respond));
    if (path == "/v1/release") return Settle(request, true, std::move(respond));
    return Check(request, config, std::move(respond));
  }
  if (path == "/v1/authz") return Authz(request, peer, config, std::move(respond));
  // Upstream's /json takes any method (its router does not restrict it).
  if (path == "/json" && rls_ != nullptr) return RlsJson(request, std::move(respond));
  const bool get = request.method() == http::verb::get || request.method() == http::verb::head;
  if (get && path == "/healthcheck") {
    // envoyproxy/ratelimit's liveness endpoint, answered as it does ("OK").
    return respond(MakeResponse(request, http::status::ok, "OK", "text/plain"));
  }
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
    if (rls_ != nullptr) rls_->AppendMetrics(text);
    return respond(
        MakeResponse(request, http::status::ok, std::move(text), "text/plain; version=0.0.4"));
  }
  if (get && path == "/" && config.demo) {
    return respond(MakeResponse(request, http::status::ok, demo_page_, "text/html; charset=utf-8"));
  }
  respond(Error(
      request, http::status::not_found, "not_found",
      fmt::format("no endpoint {} {}",
                  std::string_view(request.method_string().data(), request.method_string().size()),
                  path)));
}

void Service::RlsJson(const Request& request, Respond respond) {
  // The messages live until the engine answers, maybe on the store's thread.
  struct Call {
    rls::pb::RateLimitRequest request;
    rls::pb::RateLimitResponse response;
  };
  auto call = std::make_unique<Call>();
  const unsigned version = request.version();
  const bool keep_alive = request.keep_alive();
  // As upstream: 400 for a body that is not a RateLimitRequest (protojson refuses unknown
  // fields) and for a bad request; 429 for OVER_LIMIT; 500 for UNKNOWN. A store failure
  // under on_error=error is a 503 here (upstream has no such answer).
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(request.body().data(), request.body().size()), &call->request);
  if (!parsed.ok()) {
    return respond(
        Error(version, keep_alive, http::status::bad_request, "bad_request",
              fmt::format("not a RateLimitRequest in protobuf JSON: {}",
                          std::string_view(parsed.message().data(), parsed.message().size()))));
  }
  const rls::pb::RateLimitRequest& rls_request = call->request;
  rls::pb::RateLimitResponse* rls_response = &call->response;
  rls_->ShouldRateLimit(
      rls_request, rls_response,
      [call = std::move(call), version, keep_alive,
       respond = std::move(respond)](absl::Status status) mutable {
        if (!status.ok()) {
          const bool unavailable = absl::IsUnavailable(status);
          return respond(
              Error(version, keep_alive,
                    unavailable ? http::status::service_unavailable : http::status::bad_request,
                    unavailable ? "unavailable" : "bad_request", MessageOf(status)));
        }
        std::string body;
        if (!google::protobuf::util::MessageToJsonString(call->response, &body).ok()) {
          return respond(Error(version, keep_alive, http::status::internal_server_error, "internal",
                               "the RateLimitResponse did not serialise"));
        }
        http::status code = http::status::ok;
        if (call->response.overall_code() == rls::pb::RateLimitResponse::OVER_LIMIT) {
          code = http::status::too_many_requests;
        } else if (call->response.overall_code() == rls::pb::RateLimitResponse::UNKNOWN) {
          code = http::status::internal_server_error;
        }
        respond(MakeResponse(version, keep_alive, code, std::move(body), "application/json"));
      });
}

template <class Done>
void Service::Decide(std::string_view key, const Policy& policy, std::int64_t cost, Done done) {
  const auto begin = Steady::now();
  auto finish = [this, begin, done = std::move(done)](absl::StatusOr<Decision> d) mutable {
    const auto now = Steady::now();
    metrics_.ObserveStoreLatency(now - begin);
    if (d.ok() && d->degraded) LogDegraded(now);
    done(std::move(d));
  };
  // A store that answers inline is called directly: wrapping the continuation for an
  // asynchronous hand-off would cost an allocation per request for nothing.
  if (store_answers_inline_) return finish(store_->Decide({key, policy, cost, std::nullopt}));
  store_->DecideAsync({key, policy, cost, std::nullopt}, std::move(finish));
}

template <class Done>
void Service::DecideAll(const RequestLimits& limits, Done done) {
  const auto begin = Steady::now();
  auto finish = [this, begin, done = std::move(done)](absl::StatusOr<MultiDecision> d) mutable {
    const auto now = Steady::now();
    metrics_.ObserveStoreLatency(now - begin);
    if (d.ok() && d->degraded) LogDegraded(now);
    done(std::move(d));
  };
  const MultiRequest request{limits.items, std::nullopt};
  if (store_answers_inline_) return finish(store_->DecideAll(request));
  store_->DecideAllAsync(request, std::move(finish));
}

std::uint64_t EverySecond::Count(Steady::time_point now) {
  const std::uint64_t count = unreported_.fetch_add(1) + 1;
  std::int64_t last = last_ns_.load();
  const std::int64_t at = now.time_since_epoch().count();
  if (at - last < 1'000'000'000 || !last_ns_.compare_exchange_strong(last, at)) return 0;
  unreported_.fetch_sub(count);
  return count;
}

void Service::LogDegraded(Steady::time_point now) {
  if (const std::uint64_t count = degraded_log_.Count(now)) {
    spdlog::warn("store {} failing: {} decision(s) answered by on_error since the last report",
                 store_->Describe(), count);
  }
}

void Service::CountMulti(const RequestLimits& limits, const MultiDecision& decision) {
  const Outcome outcome = decision.degraded  ? Outcome::kDegraded
                          : decision.allowed ? Outcome::kAllowed
                                             : Outcome::kDenied;
  for (const std::string& rule : limits.rules) metrics_.CountDecision(rule, outcome);
  for (std::size_t i = 0; i < limits.items.size(); ++i) {
    if (std::find(decision.unknown.begin(), decision.unknown.end(), i) != decision.unknown.end()) {
      continue;
    }
    LimitResult result = LimitResult::kAllowed;
    if (!decision.items[i].allowed) {
      result = limits.items[i].shadow ? LimitResult::kWouldDeny : LimitResult::kDenied;
    } else if (!decision.allowed) {
      result = LimitResult::kDeniedByOther;
    }
    CountLimit(limits, i, result);
    if (result == LimitResult::kWouldDeny) {
      if (const std::uint64_t count = would_deny_log_.Count(Steady::now())) {
        spdlog::info(
            "shadow limit {} would have denied this request ({} shadow denial(s) since "
            "the last report); nothing was denied",
            limits.names[i], count);
      }
    }
  }
}

void Service::CountSingle(const RequestLimits& limits, const Decision& decision) {
  metrics_.CountDecision(limits.rules.front(), decision.degraded  ? Outcome::kDegraded
                                               : decision.allowed ? Outcome::kAllowed
                                                                  : Outcome::kDenied);
  CountLimit(limits, 0, decision.allowed ? LimitResult::kAllowed : LimitResult::kDenied);
}

void Service::CountLimit(const RequestLimits& limits, std::size_t i, LimitResult result) {
  const std::size_t rule_length = limits.rule_lengths[i];
  if (rule_length == RequestLimits::kNoRule) return;
  const std::string_view name = limits.names[i];
  // "<rule>.<limit>", or a rule's single policy named after the rule.
  metrics_.CountLimit(name.substr(0, rule_length),
                      rule_length == name.size() ? name : name.substr(rule_length + 1), result);
}

void RequestLimits::Add(std::string key, std::string name, std::size_t rule_length,
                        const Policy& policy, std::int64_t cost, bool shadow,
                        std::chrono::microseconds hold) {
  // Over-long keys are cut: clients that differ only past 512 bytes share a limit.
  if (key.size() > kMaxKeyBytes) key.resize(kMaxKeyBytes);
  keys.push_back(std::move(key));
  names.push_back(std::move(name));
  rule_lengths.push_back(rule_length);
  items.push_back(CheckItem{{}, policy, cost, {}, shadow, hold});
}

void RequestLimits::Reserve(std::size_t limits, std::size_t rule_count) {
  keys.reserve(limits);
  names.reserve(limits);
  items.reserve(limits);
  rule_lengths.reserve(limits);
  rules.reserve(rule_count);
}

void RequestLimits::Seal() {
  for (std::size_t i = 0; i < items.size(); ++i) {
    items[i].key = keys[i];
    items[i].name = names[i];
  }
}

namespace {

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

std::string Dump(const nlohmann::json& json) {
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The names of some items, as a JSON array.
std::string NamesJson(const RequestLimits& limits, std::span<const std::size_t> indexes) {
  nlohmann::json names = nlohmann::json::array();
  for (std::size_t i : indexes) names.push_back(limits.names[i]);
  return Dump(names);
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

void Service::Check(const Request& request, const ServerConfig& config, Respond respond) {
  const auto bad = [&](std::string_view message) {
    respond(Error(request, http::status::bad_request, "invalid_argument", message));
  };
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const std::string& body = request.body();
  if (const auto error = parser.parse(body.data(), body.size()).get(doc); error) {
    return bad(fmt::format("the body must be a JSON object ({})", simdjson::error_message(error)));
  }
  simdjson::dom::object object;
  if (doc.get_object().get(object) != simdjson::SUCCESS) {
    return bad("the body must be a JSON object");
  }
  simdjson::dom::array items;
  if (object["items"].get_array().get(items) == simdjson::SUCCESS) {
    if (object.size() != 1) return bad("give \"items\" alone, or a single key");
    auto limits = std::make_shared<RequestLimits>();
    std::size_t n = 0;
    for (simdjson::dom::element element : items) {
      simdjson::dom::object item;
      if (element.get_object().get(item) != simdjson::SUCCESS) {
        return bad(fmt::format("items[{}] must be a JSON object", n));
      }
      auto status = AddCheckItem(item, n, request, config, *limits);
      if (!status.ok()) {
        return respond(Error(
            request, absl::IsNotFound(status) ? http::status::not_found : http::status::bad_request,
            absl::IsNotFound(status) ? "not_found" : "invalid_argument", MessageOf(status)));
      }
      ++n;
    }
    if (limits->items.empty() || limits->items.size() > kMaxItems) {
      return bad(fmt::format("\"items\" must hold 1 to {} limits, got {}", kMaxItems,
                             limits->items.size()));
    }
    return CheckAll(request, std::move(limits), std::move(respond));
  }
  std::string_view key, rule_name, policy_text;
  bool has_key = false, has_rule = false, has_policy = false, has_cost = false;
  std::int64_t cost = 1;
  for (const auto [name, value] : object) {
    if (name == "key") {
      if (value.get_string().get(key) != simdjson::SUCCESS) return bad("\"key\" must be a string");
      has_key = true;
    } else if (name == "rule") {
      if (value.get_string().get(rule_name) != simdjson::SUCCESS)
        return bad("\"rule\" must be a string");
      has_rule = true;
    } else if (name == "policy") {
      if (value.get_string().get(policy_text) != simdjson::SUCCESS) {
        return bad("\"policy\" must be a string");
      }
      has_policy = true;
    } else if (name == "cost") {
      if (value.get_int64().get(cost) != simdjson::SUCCESS || cost < 0 || cost > kMaxCost) {
        return bad("\"cost\" must be a whole number from 0 to 1000000000");
      }
      has_cost = true;
    }
  }
  if (!has_key) return bad("missing \"key\"");
  if (has_rule == has_policy) return bad("give exactly one of \"rule\" and \"policy\"");
  if (key.empty()) return bad("\"key\" must not be empty");
  if (key.size() > kMaxKeyBytes) {
    return bad(fmt::format("\"key\" is {} bytes; the limit is {}", key.size(), kMaxKeyBytes));
  }
  if (has_rule) {
    const Rule* rule = config.Find(rule_name);
    if (rule == nullptr) {
      return respond(Error(request, http::status::not_found, "not_found",
                           fmt::format("unknown rule \"{}\"", rule_name)));
    }
    auto limits = std::make_shared<RequestLimits>();
    AddRuleLimits(*rule, key, ':', "", has_cost ? cost : rule->cost, request, config, *limits);
    limits->rules.push_back(rule->name);
    if (!limits->single()) return CheckAll(request, std::move(limits), std::move(respond));
    // One limit: the single decision, as fast as it goes.
    limits->Seal();
    const CheckItem item = limits->items.front();
    return Decide(item.key, item.policy, item.cost,
                  [this, request_version = request.version(), keep_alive = request.keep_alive(),
                   limits, respond = std::move(respond)](absl::StatusOr<Decision> decision) {
                    const CheckItem& item = limits->items.front();
                    if (!decision.ok()) {
                      return respond(Error(request_version, keep_alive, http::status::bad_request,
                                           "invalid_argument", MessageOf(decision.status())));
                    }
                    CountSingle(*limits, *decision);
                    Response response = MakeResponse(request_version, keep_alive, http::status::ok,
                                                     ToJson(*decision), "application/json");
                    AddHeaders(response, RateLimitHeaders(item.name, item.policy, *decision));
                    respond(std::move(response));
                  });
  }
  auto parsed = Policy::Parse(policy_text);
  if (!parsed.ok()) return bad(MessageOf(parsed.status()));
  const Policy policy = *parsed;
  Decide(key, policy, cost,
         [this, request_version = request.version(), keep_alive = request.keep_alive(), policy,
          respond = std::move(respond)](absl::StatusOr<Decision> decision) {
           if (!decision.ok()) {
             return respond(Error(request_version, keep_alive, http::status::bad_request,
                                  "invalid_argument", MessageOf(decision.status())));
           }
           metrics_.CountDecision(kInlinePolicy, decision->degraded  ? Outcome::kDegraded
                                                 : decision->allowed ? Outcome::kAllowed
                                                                     : Outcome::kDenied);
           Response response = MakeResponse(request_version, keep_alive, http::status::ok,
                                            ToJson(*decision), "application/json");
           AddHeaders(response, RateLimitHeaders(kInlinePolicy, policy, *decision));
           respond(std::move(response));
         });
}

namespace {

// The HTTP answer to a store's refusal of a reservation call.
Response StoreError(unsigned version, bool keep_alive, const absl::Status& status) {
  const auto [code, name] = [&]() -> std::pair<http::status, std::string_view> {
    switch (status.code()) {
      case absl::StatusCode::kInvalidArgument:
        return {http::status::bad_request, "invalid_argument"};
      case absl::StatusCode::kNotFound:
        return {http::status::not_found, "not_found"};
      case absl::StatusCode::kResourceExhausted:
        return {http::status::service_unavailable, "resource_exhausted"};
      case absl::StatusCode::kUnimplemented:
        return {http::status::not_implemented, "unimplemented"};
      case absl::StatusCode::kUnavailable:
        return {http::status::service_unavailable, "unavailable"};
      default:
        return {http::status::internal_server_error, "internal"};
    }
  }();
  return Service::Error(version, keep_alive, code, name, MessageOf(status));
}

// The body of /v1/reserve and /v1/settle: a JSON object of strings and whole numbers,
// every field known. Fills `strings` and `numbers` by field name.
absl::Status ParseFields(
    const std::string& body,
    std::initializer_list<std::pair<std::string_view, std::string_view*>> strings,
    std::initializer_list<std::pair<std::string_view, std::optional<std::int64_t>*>> numbers) {
  thread_local simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(body.data(), body.size()).get_object().get(object) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("the body must be a JSON object");
  }
  for (const auto [key, value] : object) {
    const std::string_view field = key;  // a structured binding cannot be captured (clang)
    const auto string = std::find_if(strings.begin(), strings.end(),
                                     [&](const auto& s) { return s.first == field; });
    const auto number = std::find_if(numbers.begin(), numbers.end(),
                                     [&](const auto& n) { return n.first == field; });
    if (string != strings.end()) {
      if (value.get_string().get(*string->second) != simdjson::SUCCESS) {
        return absl::InvalidArgumentError(fmt::format("\"{}\" must be a string", field));
      }
    } else if (number != numbers.end()) {
      std::int64_t n = 0;
      if (value.get_int64().get(n) != simdjson::SUCCESS) {
        return absl::InvalidArgumentError(fmt::format("\"{}\" must be a whole number", field));
      }
      *number->second = n;
    } else {
      std::string known;
      for (const auto& s : strings)
        known += fmt::format("{}{}", known.empty() ? "" : ", ", s.first);
      for (const auto& n : numbers) known += fmt::format(", {}", n.first);
      return absl::InvalidArgumentError(fmt::format("unknown field \"{}\" ({})", field, known));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void Service::Reserve(const Request& request, const ServerConfig& config, bool lease,
                      Respond respond) {
  const auto bad = [&](std::string_view message) {
    respond(Error(request, http::status::bad_request, "invalid_argument", message));
  };
  std::string_view key, rule_name, policy_text;
  std::optional<std::int64_t> estimate = lease ? std::optional<std::int64_t>(1) : std::nullopt;
  std::optional<std::int64_t> hold_ms;
  const absl::Status parsed =
      lease ? ParseFields(request.body(),
                          {{"key", &key}, {"rule", &rule_name}, {"policy", &policy_text}}, {})
            : ParseFields(request.body(),
                          {{"key", &key}, {"rule", &rule_name}, {"policy", &policy_text}},
                          {{"estimate", &estimate}, {"hold_ms", &hold_ms}});
  if (!parsed.ok()) return bad(MessageOf(parsed));
  if (key.empty()) return bad("missing \"key\"");
  if (!estimate) return bad("missing \"estimate\" (the cost to reserve)");
  if (rule_name.empty() == policy_text.empty()) {
    return bad("give exactly one of \"rule\" and \"policy\"");
  }
  if (hold_ms && (*hold_ms < 1 || *hold_ms > 86'400'000)) {
    return bad("\"hold_ms\" must be from 1 to 86400000 (24 h)");
  }
  // Owned by the answer, which may come later on the store's thread.
  auto owned = std::make_shared<RequestLimits>();
  RequestLimits& limits = *owned;
  if (!rule_name.empty()) {
    const Rule* rule = config.Find(rule_name);
    if (rule == nullptr) {
      return respond(Error(request, http::status::not_found, "not_found",
                           fmt::format("unknown rule \"{}\"", rule_name)));
    }
    // Keyed as /v1/check keys the rule's limit, so both spend the same state.
    AddRuleLimits(*rule, key, ':', "", *estimate, request, config, limits);
    if (limits.items.size() != 1 || limits.items.front().shadow) {
      const bool shadow = limits.items.size() == 1;
      return bad(fmt::format("rule \"{}\" has {} limit(s){}: a {} holds one enforced limit",
                             rule_name, limits.items.size(), shadow ? ", in shadow mode" : "",
                             lease ? "lease" : "reservation"));
    }
    limits.rules.push_back(rule->name);
  } else {
    auto policy = Policy::Parse(policy_text);
    if (!policy.ok()) return bad(MessageOf(policy.status()));
    limits.Add(std::string(key), std::string(kInlinePolicy), RequestLimits::kNoRule, *policy,
               *estimate, false);
    limits.rules.emplace_back(kInlinePolicy);
  }
  limits.Seal();
  const CheckItem& item = limits.items.front();
  const std::chrono::microseconds hold = lease     ? item.policy.period
                                         : hold_ms ? std::chrono::milliseconds(*hold_ms)
                                                   : kDefaultHold;
  auto answer = [this, version = request.version(), keep_alive = request.keep_alive(), hold, lease,
                 limits = std::move(owned),
                 respond = std::move(respond)](absl::StatusOr<Reservation> reservation) {
    if (!reservation.ok()) return respond(StoreError(version, keep_alive, reservation.status()));
    const Decision& decision = reservation->decision;
    const CheckItem& item = limits->items.front();
    if (limits->rule_lengths.front() != RequestLimits::kNoRule) {
      CountSingle(*limits, decision);
    } else {
      metrics_.CountDecision(kInlinePolicy, decision.degraded  ? Outcome::kDegraded
                                            : decision.allowed ? Outcome::kAllowed
                                                               : Outcome::kDenied);
    }
    std::string body = ToJson(decision);
    if (!reservation->id.empty()) {
      body.pop_back();  // the closing brace
      body += fmt::format(R"(,"{}":{},"{}":{}}})", lease ? "lease" : "reservation",
                          Dump(reservation->id), lease ? "lease_us" : "hold_us", hold.count());
    }
    Response response =
        MakeResponse(version, keep_alive, http::status::ok, std::move(body), "application/json");
    AddHeaders(response, RateLimitHeaders(item.name, item.policy, decision));
    respond(std::move(response));
  };
  if (lease) {
    return store_->AcquireAsync(AcquireRequest{item.key, item.policy, std::nullopt},
                                std::move(answer));
  }
  store_->ReserveAsync(ReserveRequest{item.key, item.policy, item.cost, hold, std::nullopt},
                       std::move(answer));
}

void Service::Settle(const Request& request, bool lease, Respond respond) {
  const auto bad = [&](std::string_view message) {
    respond(Error(request, http::status::bad_request, "invalid_argument", message));
  };
  if (request.body().empty()) return SettleHook(request, std::move(respond));
  std::string_view id;
  std::optional<std::int64_t> actual = lease ? std::optional<std::int64_t>(0) : std::nullopt;
  const absl::Status parsed =
      lease ? ParseFields(request.body(), {{"lease", &id}}, {})
            : ParseFields(request.body(), {{"reservation", &id}}, {{"actual", &actual}});
  if (!parsed.ok()) return bad(MessageOf(parsed));
  if (id.empty()) {
    return bad(lease ? "missing \"lease\" (the id /v1/acquire answered)"
                     : "missing \"reservation\" (the id /v1/reserve answered)");
  }
  if (!actual) return bad("missing \"actual\" (the cost the request really had)");
  // A release is the settle of the lease's reservation at 0 (Store::Release).
  store_->SettleAsync(SettleRequest{id, *actual, std::nullopt},
                      [version = request.version(), keep_alive = request.keep_alive(),
                       respond = std::move(respond)](absl::StatusOr<Decision> decision) {
                        if (!decision.ok()) {
                          return respond(StoreError(version, keep_alive, decision.status()));
                        }
                        respond(MakeResponse(version, keep_alive, http::status::ok,
                                             ToJson(*decision), "application/json"));
                      });
}

// The settle hook (docs/leases.md, "Behind nginx or Envoy"): /v1/settle or /v1/release
// without a body. Every lease of X-RateLimit-Lease is released and every reservation of
// X-RateLimit-Reservation settled at X-RateLimit-Actual; 204 when each was, else the
// first refusal's error (a lease or reservation not found was settled already, or its
// hold had ended).
void Service::SettleHook(const Request& request, Respond respond) {
  struct Hook {
    std::vector<std::pair<std::string, std::int64_t>> settles;  // id, actual
    std::size_t answered = 0;
    std::mutex mu;
    absl::Status first_error;
    unsigned version;
    bool keep_alive;
    Respond respond;
  };
  auto hook = std::make_shared<Hook>();
  const auto add = [&](std::string_view header, std::int64_t actual) {
    for (const absl::string_view id : absl::StrSplit(ToAbsl(header), ',', absl::SkipWhitespace())) {
      hook->settles.emplace_back(ToStd(absl::StripAsciiWhitespace(id)), actual);
    }
  };
  const auto bad = [&](std::string message) {
    respond(Error(request, http::status::bad_request, "invalid_argument", message));
  };
  add(HeaderValue(request, kLeaseHeader), 0);
  const std::string_view reservations = HeaderValue(request, kReservationHeader);
  if (!reservations.empty()) {
    const std::string_view text = HeaderValue(request, kActualHeader);
    std::uint64_t actual = 0;
    if (!ParseDecimal(text, actual) || actual > static_cast<std::uint64_t>(kMaxCost)) {
      return bad(
          fmt::format("{} must be the actual cost, a whole number from 0 to {}, got \"{}\" (the "
                      "reservations stay charged at their estimates until their holds end)",
                      kActualHeader, kMaxCost, text));
    }
    add(reservations, static_cast<std::int64_t>(actual));
  }
  if (hook->settles.empty() || hook->settles.size() > kMaxItems) {
    return bad(fmt::format("give a JSON body, or 1 to {} ids in {} and {}", kMaxItems, kLeaseHeader,
                           kReservationHeader));
  }
  hook->version = request.version();
  hook->keep_alive = request.keep_alive();
  hook->respond = std::move(respond);
  for (const auto& [id, actual] : hook->settles) {
    store_->SettleAsync(
        SettleRequest{id, actual, std::nullopt}, [hook](absl::StatusOr<Decision> done) {
          std::unique_lock lock(hook->mu);
          if (!done.ok() && hook->first_error.ok()) hook->first_error = done.status();
          if (++hook->answered < hook->settles.size()) return;
          lock.unlock();
          if (!hook->first_error.ok()) {
            return hook->respond(StoreError(hook->version, hook->keep_alive, hook->first_error));
          }
          hook->respond(MakeResponse(hook->version, hook->keep_alive, http::status::no_content, "",
                                     "text/plain"));
        });
  }
}

// One entry of /v1/check's "items": {"key", "rule" | "policy", "cost", "name"}. A rule
// brings all its limits, keyed as a {"key", "rule"} check keys them.
absl::Status Service::AddCheckItem(simdjson::dom::object item, std::size_t index,
                                   const Request& request, const ServerConfig& config,
                                   RequestLimits& limits) {
  const auto bad = [index](std::string_view what) {
    return absl::InvalidArgumentError(fmt::format("items[{}]: {}", index, what));
  };
  std::string_view key, rule_name, policy_text, name;
  std::int64_t cost = -1, hold_ms = 0;
  for (const auto [field, value] : item) {
    if (field == "key") {
      if (value.get_string().get(key) != simdjson::SUCCESS) return bad("\"key\" must be a string");
    } else if (field == "rule") {
      if (value.get_string().get(rule_name) != simdjson::SUCCESS) {
        return bad("\"rule\" must be a string");
      }
    } else if (field == "policy") {
      if (value.get_string().get(policy_text) != simdjson::SUCCESS) {
        return bad("\"policy\" must be a string");
      }
    } else if (field == "name") {
      if (value.get_string().get(name) != simdjson::SUCCESS)
        return bad("\"name\" must be a string");
    } else if (field == "cost") {
      if (value.get_int64().get(cost) != simdjson::SUCCESS || cost < 0 || cost > kMaxCost) {
        return bad("\"cost\" must be a whole number from 0 to 1000000000");
      }
    } else if (field == "hold_ms") {
      if (value.get_int64().get(hold_ms) != simdjson::SUCCESS || hold_ms < 1 ||
          hold_ms > kMaxHold.count() / 1000) {
        return bad(fmt::format("\"hold_ms\" must be a whole number from 1 to {}",
                               kMaxHold.count() / 1000));
      }
    } else {
      return bad(fmt::format("unknown field \"{}\" (key, rule, policy, cost, name, hold_ms)",
                             std::string_view(field)));
    }
  }
  if (key.empty() || key.size() > kMaxKeyBytes) {
    return bad(fmt::format("\"key\" must be 1 to {} bytes", kMaxKeyBytes));
  }
  if (rule_name.empty() == policy_text.empty())
    return bad("give exactly one of \"rule\" and \"policy\"");
  if (!rule_name.empty()) {
    const Rule* rule = config.Find(rule_name);
    if (rule == nullptr) {
      return absl::NotFoundError(fmt::format("items[{}]: unknown rule \"{}\"", index, rule_name));
    }
    AddRuleLimits(*rule, key, ':', "", cost < 0 ? rule->cost : cost, request, config, limits,
                  std::chrono::milliseconds(hold_ms));
    if (std::find(limits.rules.begin(), limits.rules.end(), rule->name) == limits.rules.end()) {
      limits.rules.push_back(rule->name);
    }
    return absl::OkStatus();
  }
  auto policy = Policy::Parse(policy_text);
  if (!policy.ok()) return bad(MessageOf(policy.status()));
  limits.Add(std::string(key), name.empty() ? fmt::format("items[{}]", index) : std::string(name),
             RequestLimits::kNoRule, *policy, cost < 0 ? 1 : cost, config.shadow,
             std::chrono::milliseconds(hold_ms));
  if (std::find(limits.rules.begin(), limits.rules.end(), kInlinePolicy) == limits.rules.end()) {
    limits.rules.emplace_back(kInlinePolicy);
  }
  return absl::OkStatus();
}

// A rule's limits for one client: each keyed `<rule>.<limit><sep>{<identity>}` (the
// client in a hash tag, so that all limits of one client share a Redis Cluster slot),
// its policy chosen by the client's override or plan.
void Service::AddRuleLimits(const Rule& rule, std::string_view identity, char sep,
                            std::string_view override_key, std::int64_t cost,
                            const Request& request, const ServerConfig& config,
                            RequestLimits& limits, std::chrono::microseconds hold) {
  const std::string_view chosen_by = override_key.empty() ? identity : override_key;
  for (const Limit& limit : rule.limits) {
    const std::string_view plan =
        limit.plan_header.empty() ? std::string_view() : HeaderValue(request, limit.plan_header);
    std::string key;  // <rule>.<limit><sep>{<identity>}, without a format string to parse
    key.reserve(limit.qualified.size() + identity.size() + 3);
    key.append(limit.qualified).append(1, sep).append(1, '{').append(identity).append(1, '}');
    const Policy& policy = limit.For(chosen_by, plan);
    // A concurrency limit holds its lease for the lease time, reserved or not.
    limits.Add(std::move(key), limit.qualified, rule.name.size(), policy, cost,
               limit.shadow || config.shadow,
               policy.algorithm == Algorithm::kConcurrency ? std::chrono::microseconds(0) : hold);
  }
}

void Service::CheckAll(const Request& request, std::shared_ptr<RequestLimits> limits,
                       Respond respond) {
  limits->Seal();
  // The store validates the items (ValidateMultiRequest) and answers a bad request as an
  // error, which the callback turns into the 400.
  DecideAll(*limits, [this, version = request.version(), keep_alive = request.keep_alive(), limits,
                      respond = std::move(respond)](absl::StatusOr<MultiDecision> decision) {
    if (!decision.ok()) return respond(StoreError(version, keep_alive, decision.status()));
    CountMulti(*limits, *decision);
    Response response = MakeResponse(version, keep_alive, http::status::ok,
                                     MultiJson(*limits, *decision), "application/json");
    AddHeaders(response, MultiRateLimitHeaders(*limits, *decision));
    AddHeldHeaders(response, *limits, *decision);
    respond(std::move(response));
  });
}

// The client as a rule identifies it: the key part (`ip=...`, `h=...`, `c=...` joined by
// '|'; "*" for `identify: none`) and the value overrides are named by (the values joined by
// '+'). A missing cookie falls back to the IP (and a new cookie is issued), so dropping
// the cookie gains nothing.
std::pair<std::string, std::string> Service::Identify(const Rule& rule, const Request& request,
                                                      const ip::address& client,
                                                      std::string& issued_cookie) {
  if (rule.identify.empty()) return {"*", "*"};
  std::string key, value;
  for (const IdentityPart& part : rule.identify) {
    if (!key.empty()) {
      key += '|';
      value += '+';
    }
    switch (part.kind) {
      case IdentityPart::Kind::kIp: {
        const std::string ip = client.to_string();
        key += "ip=" + ip;
        value += ip;
        break;
      }
      case IdentityPart::Kind::kHeader: {
        const std::string_view header = HeaderValue(request, part.name);
        if (header.empty()) {
          const std::string ip = client.to_string();
          key += "ip=" + ip;
          value += ip;
        } else {
          key += "h=";
          key += header;
          value += header;
        }
        break;
      }
      case IdentityPart::Kind::kCookie: {
        const auto cookie = CookieValue(request, part.name);
        if (cookie && LooksLikeUuid(*cookie)) {
          key += fmt::format("c={}", *cookie);
          value += *cookie;
        } else {
          const std::string ip = client.to_string();
          key += "ip=" + ip;
          value += ip;
          if (issued_cookie.empty()) {
            issued_cookie = fmt::format("{}={}; Path=/; Max-Age=31536000; HttpOnly; SameSite=Lax",
                                        part.name, NewUuidV7());
          }
        }
        break;
      }
    }
  }
  return {std::move(key), std::move(value)};
}

void Service::Authz(const Request& request, const ip::address& peer, const ServerConfig& config,
                    Respond respond) {
  const std::string_view target(request.target().data(), request.target().size());
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
  const ip::address client = ClientAddress(request, peer, config);
  auto limits = std::make_shared<RequestLimits>();
  std::size_t count = 0;
  for (const Rule* rule : rules) count += rule->limits.size();
  limits->Reserve(count, rules.size());
  for (const Rule* rule : rules) {
    auto [key, value] = Identify(*rule, request, client, limits->issued_cookie);
    // cost_from_response: the rule's cost is reserved as the estimate (settled later).
    AddRuleLimits(*rule, key, '|', value, rule->cost, request, config, *limits,
                  rule->cost_from_response ? rule->hold : std::chrono::microseconds(0));
    limits->rules.push_back(rule->name);
  }
  const int deny_status =
      QueryParam(target, "deny_status") == "403" ? 403 : config.authz_deny_status;
  const auto answer = [version = request.version(), keep_alive = request.keep_alive(), deny_status](
                          const RequestLimits& limits, bool allowed,
                          std::span<const std::size_t> denied_by) {
    return allowed ? MakeResponse(version, keep_alive, http::status::no_content, "", "text/plain")
                   : MakeResponse(version, keep_alive, static_cast<http::status>(deny_status),
                                  fmt::format(R"({{"status": 429, "code": "rate_limit:exceeded", )"
                                              R"("denied_by": {}}})",
                                              NamesJson(limits, denied_by)),
                                  "application/json");
  };
  if (limits->single()) {
    limits->Seal();
    const CheckItem item = limits->items.front();
    return Decide(item.key, item.policy, item.cost,
                  [this, version = request.version(), keep_alive = request.keep_alive(), limits,
                   answer, respond = std::move(respond)](absl::StatusOr<Decision> decision) {
                    const CheckItem& item = limits->items.front();
                    if (!decision.ok()) {
                      return respond(Error(version, keep_alive, http::status::internal_server_error,
                                           "internal", MessageOf(decision.status())));
                    }
                    CountSingle(*limits, *decision);
                    constexpr std::size_t kFirst[] = {0};
                    Response response = answer(*limits, decision->allowed, kFirst);
                    AddHeaders(response, RateLimitHeaders(item.name, item.policy, *decision));
                    if (!limits->issued_cookie.empty()) {
                      response.headers.emplace_back("Set-Cookie", limits->issued_cookie);
                    }
                    respond(std::move(response));
                  });
  }
  limits->Seal();
  // The store validates the items and answers a bad set (two limits of the config on one
  // key and algorithm) as an error: the callback's 500.
  DecideAll(*limits,
            [this, version = request.version(), keep_alive = request.keep_alive(), limits, answer,
             respond = std::move(respond)](absl::StatusOr<MultiDecision> decision) {
              if (!decision.ok()) {
                return respond(Error(version, keep_alive, http::status::internal_server_error,
                                     "internal", MessageOf(decision.status())));
              }
              CountMulti(*limits, *decision);
              Response response = answer(*limits, decision->allowed, decision->denied_by);
              AddHeaders(response, MultiRateLimitHeaders(*limits, *decision));
              AddHeldHeaders(response, *limits, *decision);
              if (!limits->issued_cookie.empty()) {
                response.headers.emplace_back("Set-Cookie", limits->issued_cookie);
              }
              respond(std::move(response));
            });
}

}  // namespace floodgate::server

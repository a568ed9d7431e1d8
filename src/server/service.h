#pragma once

// The HTTP API of `floodgate serve` (service.md, "HTTP API"), independent of sockets:
// a parsed request and the peer address in, a response out through a callback (store
// decisions may complete on the store's I/O thread).

#include <floodgate/store.h>
#include <simdjson.h>

#include <atomic>
#include <boost/asio/ip/address.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <memory_resource>
#include <string>
#include <utility>
#include <vector>

#include "server/config.h"
#include "server/headers.h"
#include "server/metrics.h"

namespace floodgate::server {

namespace rls {
class Engine;
}

namespace http = boost::beast::http;
// Request header fields come from a per-connection arena, released between requests:
// Beast allocates one node per header, and with the default allocator those
// allocations measured among the largest user-space costs of a request.
using FieldAllocator = std::pmr::polymorphic_allocator<char>;
using Request = http::request<http::string_body, http::basic_fields<FieldAllocator>>;

// A response as the service builds it: a status, a few headers, a body. Deliberately not
// Beast's message type: its fields allocate one node per header, which measured among the
// largest user-space costs of a request; the server lays this out in one buffer.
struct Response {
  int status = 200;
  unsigned version = 11;  // of the request it answers
  bool keep_alive = true;
  bool head = false;  // answer to HEAD: headers only
  std::string_view content_type = "application/json";
  HeaderList headers;  // names are literals
  std::string body;

  int result_int() const { return status; }
  // The value of header `name` (case-insensitive), or "" when absent.
  std::string_view Header(std::string_view name) const;
  // HTTP/1.1 wire format: status line, headers (Server, Content-Type, Content-Length,
  // Connection as needed, then `headers`), blank line, body.
  void SerializeTo(std::string& out) const;
};
using Respond = std::function<void(Response)>;

// Counts events and says when to report them: at most once a second, with how many
// there were since the last report. Thread-safe.
class EverySecond {
 public:
  // Counts one; returns the count to report now, or 0 (the last report is too recent).
  std::uint64_t Count(std::chrono::steady_clock::time_point now);

 private:
  std::atomic<std::int64_t> last_ns_{0};
  std::atomic<std::uint64_t> unreported_{0};
};

// The limits one request meets (docs/multi.md), owning the strings their items point
// into, so that an answer arriving later on the store's thread still has them.
struct RequestLimits {
  std::vector<std::string> keys;
  std::vector<std::string> names;  // <rule>.<limit>, or the rule's name for a single policy
  std::vector<CheckItem> items;    // their keys and names set by Seal()
  std::vector<std::string> rules;  // the rules involved, for metrics
  // The length of the rule's name at the front of each name (kNoRule: a policy given in
  // the request, not counted per limit).
  std::vector<std::size_t> rule_lengths;
  std::string issued_cookie;  // /v1/authz: a new anonymous cookie to set

  static constexpr std::size_t kNoRule = std::string::npos;
  void Add(std::string key, std::string name, std::size_t rule_length, const Policy& policy,
           std::int64_t cost, bool shadow,
           std::chrono::microseconds hold = std::chrono::microseconds(0));
  // Room for `limits` limits from `rule_count` rules: one allocation per list.
  void Reserve(std::size_t limits, std::size_t rule_count);
  // Points every item at its key and name: once all are added.
  void Seal();
  // One enforced limit that holds nothing (no lease, no reservation): the single
  // decision serves it.
  bool single() const {
    return items.size() == 1 && !items.front().shadow && HoldOf(items.front()).count() == 0;
  }
};

class Service {
 public:
  // `store` and the initial config; the demo page's placeholders are filled once.
  Service(std::shared_ptr<Store> store, std::shared_ptr<const ServerConfig> config);

  // Thread-safe. Calls `respond` exactly once, inline or later.
  void Handle(const Request& request, const boost::asio::ip::address& peer, Respond respond);

  // Envoy's rate limit service for `POST /json`, as upstream's HTTP port offers it.
  // Called before serving; `engine` outlives the service.
  void AttachRls(rls::Engine* engine) { rls_ = engine; }

  // Swaps in a new config (SIGHUP); requests in flight keep the one they started with.
  void Reload(std::shared_ptr<const ServerConfig> config);
  std::shared_ptr<const ServerConfig> config() const { return config_.load(); }

  // Counts a response by status class for /metrics; the server calls it as it writes.
  void CountResponse(int status) { metrics_.CountHttp(status); }

  // A JSON error body {"status": N, "code": "...", "message": "..."}.
  static Response Error(const Request& request, http::status status, std::string_view code,
                        std::string_view message);
  static Response Error(unsigned version, bool keep_alive, http::status status,
                        std::string_view code, std::string_view message);

 private:
  void Check(const Request& request, const ServerConfig& config, Respond respond);
  // POST /v1/reserve and /v1/settle (docs/reservations.md).
  // /v1/reserve and /v1/settle; with `lease`, /v1/acquire and /v1/release (a lease is a
  // reservation of 1 for the lease time, released by settling it at 0).
  void Reserve(const Request& request, const ServerConfig& config, bool lease, Respond respond);
  void Settle(const Request& request, bool lease, Respond respond);
  // /v1/settle or /v1/release without a body: the ids of the X-RateLimit-Lease and
  // X-RateLimit-Reservation headers, released and settled.
  void SettleHook(const Request& request, Respond respond);
  void Authz(const Request& request, const boost::asio::ip::address& peer,
             const ServerConfig& config, Respond respond);
  // POST /json: a RateLimitRequest as protobuf JSON in, the RateLimitResponse out.
  void RlsJson(const Request& request, Respond respond);
  // The current config, through a per-thread cache: loading the shared pointer itself on
  // every request costs a lock and two reference-count updates.
  const ServerConfig& CurrentConfig();
  // Decides and calls `done` (inline, or later on the store's thread).
  template <class Done>
  void Decide(std::string_view key, const Policy& policy, std::int64_t cost, Done done);
  template <class Done>
  void DecideAll(const RequestLimits& limits, Done done);
  void CheckAll(const Request& request, std::shared_ptr<RequestLimits> limits, Respond respond);
  absl::Status AddCheckItem(simdjson::dom::object item, std::size_t index, const Request& request,
                            const ServerConfig& config, RequestLimits& limits);
  // `hold` > 0: each rate limit reserves `cost` for that long (cost_from_response).
  void AddRuleLimits(const Rule& rule, std::string_view identity, char sep,
                     std::string_view override_key, std::int64_t cost, const Request& request,
                     const ServerConfig& config, RequestLimits& limits,
                     std::chrono::microseconds hold = std::chrono::microseconds(0));
  static std::pair<std::string, std::string> Identify(const Rule& rule, const Request& request,
                                                      const boost::asio::ip::address& client,
                                                      std::string& issued_cookie);
  void CountMulti(const RequestLimits& limits, const MultiDecision& decision);
  void CountSingle(const RequestLimits& limits, const Decision& decision);
  // Item i's limit in floodgate_limit_decisions_total, unless it came from no rule.
  void CountLimit(const RequestLimits& limits, std::size_t i, LimitResult result);
  void LogDegraded(std::chrono::steady_clock::time_point now);

  std::shared_ptr<Store> store_;
  rls::Engine* rls_ = nullptr;
  const bool store_answers_inline_;  // memory://: no asynchronous hand-off needed
  std::atomic<std::shared_ptr<const ServerConfig>> config_;
  std::atomic<std::uint64_t> config_generation_{0};
  const std::uint64_t id_;  // tells this service's cache entries from another's
  std::string demo_page_;
  Metrics metrics_;
  // Degraded answers and shadow denials are logged at most once a second, with how many
  // there were.
  EverySecond degraded_log_;
  EverySecond would_deny_log_;
};

// The client's address: the peer, unless the peer is a trusted proxy; then the
// right-most address of X-Forwarded-For that is not trusted.
boost::asio::ip::address ClientAddress(const Request& request, const boost::asio::ip::address& peer,
                                       const ServerConfig& config);

// A new UUIDv7 (RFC 9562), for the anonymous cookie.
std::string NewUuidV7();

}  // namespace floodgate::server

#pragma once

// The service's configuration (docs/service.md, "Config file"): immutable, swapped on SIGHUP.

#include <absl/status/statusor.h>
#include <floodgate/multi.h>
#include <floodgate/policy.h>
#include <floodgate/redis_store.h>
#include <floodgate/reservation.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace floodgate::server {

// One way to tell clients apart; a rule may combine several ("ip+header:X-Api-Key").
struct IdentityPart {
  enum class Kind { kIp, kHeader, kCookie } kind;
  std::string name;  // header or cookie name
};

// One limit of a rule (docs/multi.md): a rule's single `policy:` is one limit named after
// the rule; `limits:` gives several, all decided together for every request the rule
// matches.
struct Limit {
  std::string name;       // "daily"; the rule's name for a rule's single policy
  std::string qualified;  // "api.daily": in headers, denied_by and metrics ("api" when single)
  Policy policy;          // the default; overrides and policy_from may choose another
  bool shadow = false;    // decided and counted, never denies
  // Policies for named identities (the identity's value: a header's, an IP, a cookie's;
  // several parts joined by '+'), e.g. a big customer's API key.
  std::vector<std::pair<std::string, Policy>> overrides;
  // A policy chosen by a request header's value (a plan: free, pro...), or `fallback`
  // when the value is missing or not in the map.
  std::string plan_header;
  std::vector<std::pair<std::string, Policy>> plans;
  std::optional<Policy> plan_fallback;

  // The policy for a client: its override, else its plan, else `policy`.
  const Policy& For(std::string_view identity, std::string_view plan) const;
};

struct Rule {
  std::string name;
  std::string path_prefix = "/";
  std::vector<std::string> methods;    // upper case; empty: any method
  std::vector<IdentityPart> identify;  // empty: `identify: none`, one key for everyone
  std::vector<Limit> limits;           // 1..kMaxItems
  std::int64_t cost = 1;
  // cost_from_response (docs/reservations.md, "Behind a proxy"): at /v1/authz each rate
  // limit of the rule reserves `cost` as the estimate, held for `hold`, and the proxy
  // settles the actual cost once the response is done (its concurrency limits take
  // leases as always).
  bool cost_from_response = false;
  std::chrono::microseconds hold = kDefaultHold;

  bool Matches(std::string_view method, std::string_view path) const;
  // The cookie this rule issues when missing, if it identifies by one.
  const IdentityPart* cookie() const;
};

using Network = std::variant<boost::asio::ip::network_v4, boost::asio::ip::network_v6>;

struct StoreConfig {
  std::string url = "memory://";
  std::string prefix = "fg:";
  std::chrono::microseconds timeout = std::chrono::milliseconds(50);
  OnError on_error = OnError::kLocal;

  // The URL with prefix, timeout, on_error and lazy_connect=1 added for stores that take
  // them (unless the URL gives them).
  std::string EffectiveUrl() const;
  friend bool operator==(const StoreConfig&, const StoreConfig&) = default;
};

// Envoy's rate limit service (RLS v3, docs/envoy.md): envoyproxy/ratelimit's settings
// that floodgate's config file may give (its environment variables fill the rest).
struct RlsSection {
  // Upstream's RUNTIME_ROOT / RUNTIME_SUBDIRECTORY / RUNTIME_IGNOREDOTFILES.
  std::string runtime_root;
  std::string runtime_subdirectory;
  bool ignore_dotfiles = false;
  // `on_error: error`: a store failure is answered gRPC UNAVAILABLE at once, so that
  // Envoy's own failure_mode_deny decides (instead of the store's on_error answer).
  bool unavailable_on_store_error = false;
  friend bool operator==(const RlsSection&, const RlsSection&) = default;
};

// `admin:` (docs/http.md, "Operating a key"): the key operations' endpoints, which answer 404
// without it. The token is read from its file at every load (start, config check, SIGHUP),
// so rotating it is a reload.
struct AdminSection {
  std::string token_file;
  std::string token;  // the file's text, without the whitespace around it
};
// A token's bounds: shorter ones are guessable, longer ones are not a token.
inline constexpr std::size_t kMinAdminTokenBytes = 16;
inline constexpr std::size_t kMaxAdminTokenBytes = 1024;

// max_waiting's default and range: a held answer costs ~660 bytes beyond its connection,
// ~11 KiB with it (bench/authz_hold_bench.py, docs/http.md), so the default's 10,000 held
// answers stay near 110 MiB.
inline constexpr std::int64_t kDefaultMaxWaiting = 10'000;
inline constexpr std::int64_t kMaxMaxWaiting = 1'000'000;

struct ServerConfig {
  std::string source;  // the file it came from, or "defaults"
  std::string listen = "127.0.0.1:8080";
  // HOST:PORT of the gRPC rate limit service (RLS v3); empty: no gRPC server.
  std::string grpc_listen;
  RlsSection rls;
  StoreConfig store;
  std::vector<Network> trusted_proxies;
  int authz_deny_status = 429;
  // /v1/authz answers held for their delay= at once, per process (docs/http.md, "Waiting");
  // past it a delayed request is answered 429. Each held answer keeps its connection open.
  std::int64_t max_waiting = kDefaultMaxWaiting;
  bool demo = true;
  bool shadow = false;  // every limit in shadow mode: decided and counted, nothing denied
  // Whether a request may bring its own policy ("policy" on /v1/check, /v1/reserve,
  // /v1/acquire); false: only the configured rules decide (403 permission_denied).
  bool inline_policies = true;
  std::vector<Rule> rules;
  std::optional<AdminSection> admin;
  // Whether the file set these, so the environment (FLOODGATE_LISTEN, FLOODGATE_STORE)
  // fills in only what it left out.
  bool listen_given = false;
  bool store_url_given = false;
  bool grpc_listen_given = false;

  // Every rule that matches, in config order (none: the request is allowed untouched).
  // At most kMaxItems limits in all (ParseConfig refuses configs that could exceed it).
  std::vector<const Rule*> MatchAll(std::string_view method, std::string_view path) const;
  const Rule* Find(std::string_view name) const;
  bool Trusted(const boost::asio::ip::address& address) const;
};

// The rules one config may have (docs/security.md, "Configuration files"): every request is
// matched against each in turn (MatchAll), ~10 ns a rule: 1 ms of CPU a request at the bound.
inline constexpr std::size_t kMaxRules = 100'000;

// Parses a YAML config. Errors name the file, the line and the reason, e.g.
// "floodgate.yaml:12: rules[1].policy: invalid policy ...: burst must be >= 1, got 0".
absl::StatusOr<ServerConfig> LoadConfig(const std::string& path);
absl::StatusOr<ServerConfig> ParseConfig(std::string_view yaml, const std::string& source);

// envoyproxy/ratelimit's Redis settings (its REDIS_* variables), already read.
struct UpstreamRedis {
  std::string url;              // REDIS_URL
  std::string type = "single";  // REDIS_TYPE, lower case: single, cluster or sentinel
  std::string socket_type;      // REDIS_SOCKET_TYPE: "tcp", "unix", or "" (by the URL)
  std::string auth;             // REDIS_AUTH: password or user:password
  std::string sentinel_auth;    // REDIS_SENTINEL_AUTH: the sentinels' own
  bool tls = false;             // REDIS_TLS
  std::string ca, cert, key;    // REDIS_TLS_CACERT, REDIS_TLS_CLIENT_CERT, _KEY
  bool skip_hostname_verification = false;
  std::optional<std::int64_t> pool_size;                     // REDIS_POOL_SIZE, when set
  std::optional<std::chrono::microseconds> connect_timeout;  // REDIS_TIMEOUT, when set
};

// The store URL those settings describe (REDIS_URL as host:port, or a socket path with
// socket type unix; type single|cluster|sentinel, auth, TLS and its files, pool size →
// connections): an error for what cannot map (TLS on a socket). Sentinel's REDIS_URL is
// mymaster,host:port,... (redis-sentinel://host:port,.../mymaster). A REDIS_URL with a scheme
// is floodgate's own URL, as is. Defined in upstream_redis_env.cc.
absl::StatusOr<std::string> StoreUrlFromUpstreamRedis(const UpstreamRedis& redis);

// `floodgate serve`'s reading of upstream's Redis variables through `env` (nullptr: unset):
// nullopt when REDIS_URL is unset or empty; REDIS_TYPE and REDIS_SOCKET_TYPE in any case.
absl::StatusOr<std::optional<std::string>> StoreUrlFromUpstreamRedisEnv(
    const std::function<const char*(const char*)>& env);

// Parses "HOST:PORT" ("[::1]:8080" for IPv6).
absl::StatusOr<std::pair<std::string, std::uint16_t>> ParseListen(std::string_view listen);

}  // namespace floodgate::server

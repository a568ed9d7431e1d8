#pragma once

// Envoy's rate limit service (RLS v3) on floodgate's stores, independent of the transport.
//
// envoyproxy/ratelimit's configuration and answers, decided by floodgate's algorithms
// (docs/envoy.md is the contract). The gRPC server and the HTTP `POST /json` endpoint both hand
// requests to an Engine.

#include <absl/functional/any_invocable.h>
#include <absl/status/status.h>
#include <floodgate/store.h>

#include <cstdint>
#include <memory>
#include <string>

#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace floodgate::server::rls {

namespace pb = ::envoy::service::ratelimit::v3;

// The most descriptors one request may carry; more is INVALID_ARGUMENT before any is
// read. Envoy sends one per matched `rate_limits` action, a handful in practice; the bound
// keeps one request's store work within one script call of the Redis store (64 decisions)
// so that no client's request can queue past the store's timeout on its own (docs/security.md).
inline constexpr int kMaxDescriptors = 64;

class RlsConfig;
class RlsMetrics;

// Calls the transport back exactly once: OK with the response filled in, or an error the
// transport maps to its own status (gRPC: the code as is; INVALID_ARGUMENT for a bad
// request, UNAVAILABLE when the store failed under on_error=error).
using RlsDone = absl::AnyInvocable<void(absl::Status)>;

// How `floodgate serve` runs the rate limit service: envoyproxy/ratelimit's settings
// (the environment variables it reads, or the `rls:` section of floodgate's config).
struct RlsSettings {
  // Config files: every file of <runtime_root>/<runtime_subdirectory>/config/ (as upstream
  // lays them out; RUNTIME_ROOT, RUNTIME_SUBDIRECTORY, RUNTIME_IGNOREDOTFILES), reloaded
  // when they change.
  std::string runtime_root;
  std::string runtime_subdirectory;
  bool ignore_dotfiles = false;
  // SHADOW_MODE: every OVER_LIMIT is answered OK (and counted).
  bool global_shadow = false;
  // LIMIT_RESPONSE_HEADERS_ENABLED and upstream's header names.
  bool response_headers = false;
  std::string limit_header = "RateLimit-Limit";
  std::string remaining_header = "RateLimit-Remaining";
  std::string reset_header = "RateLimit-Reset";
  // QUOTA_MODE: every descriptor is in quota mode (as a descriptor's `quota_mode`): an
  // OVER_LIMIT answers the request OVER_LIMIT only when all of them are over.
  bool global_quota = false;
  // RESPONSE_DYNAMIC_METADATA: every answer carries upstream's dynamic_metadata (the
  // request, and the metadata of the limits that passed).
  bool dynamic_metadata = false;
  // MERGE_DOMAIN_CONFIG: a domain may span files, their descriptors merged.
  bool merge_domains = false;
  // on_error: error — a store failure is answered UNAVAILABLE at once (Envoy's own
  // failure_mode_deny decides) instead of the store's on_error answer.
  bool unavailable_on_store_error = false;
  // Upstream's counters (docs/envoy.md, "Shared counters"): how rules without floodgate's
  // extensions count, on upstream's keys. CACHE_KEY_PREFIX starts every key; NEAR_LIMIT_RATIO
  // marks near_limit hits; EXPIRATION_JITTER_MAX_SECONDS adds up to that much (less one) to a
  // key's TTL; STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT spares a request's other keys when one
  // is over; LOCAL_CACHE_SIZE_IN_BYTES bounds the local over-limit cache (0: none).
  std::string cache_key_prefix;
  float near_limit_ratio = 0.8f;
  std::int64_t expiration_jitter_max_seconds = 300;
  bool stop_increment_when_over = false;
  std::size_t local_cache_bytes = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Thread-safe. Fills `response` (owned by the caller, alive until `done`) and calls
  // `done`, inline or later on the store's I/O thread.
  virtual void ShouldRateLimit(const pb::RateLimitRequest& request, pb::RateLimitResponse* response,
                               RlsDone done) = 0;
  // Appends the engine's Prometheus families (HELP and TYPE included) for /metrics.
  virtual void AppendMetrics(std::string& out) const { (void)out; }
  // The config requests are decided on now (upstream's /rlconfig, health); nullptr: none.
  // Thread-safe.
  virtual std::shared_ptr<const RlsConfig> CurrentConfig() const { return nullptr; }
  // The counters the engine keeps (upstream's stats read them); nullptr: none. Thread-safe.
  virtual RlsMetrics* metrics() { return nullptr; }
  // Config loads so far, the first one included (upstream's config_load_success / _error).
  struct ConfigLoads {
    std::uint64_t success = 0;
    std::uint64_t error = 0;
  };
  virtual ConfigLoads config_loads() const { return {}; }
};

}  // namespace floodgate::server::rls

#pragma once

// What the `ratelimit` command (upstream mode) runs with, decided from upstream's environment.
//
// docs/envoy.md, "Two ways to run it". Everything comes from the variables of upstream_settings.h
// with upstream's defaults: the listeners, the Redis store, the config directory, logging, health.

#include <absl/status/statusor.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/rls/config.h"
#include "server/rls/engine.h"
#include "server/rls/grpc_tls.h"
#include "server/rls/upstream_settings.h"
#include "server/rls/upstream_stats.h"

namespace floodgate::server::rls {

struct Listener {
  std::string host;
  std::uint16_t port = 0;
};

// logrus' levels, as LOG_LEVEL names them.
enum class LogLevel { kFatal, kError, kWarn, kInfo, kDebug, kTrace };
enum class LogFormat { kText, kJson };

// jpillora/backoff's Backoff.ForAttempt, which upstream waits by at its Redis start and between
// its xDS streams: min·factor^attempt (attempt from 0), jittered uniformly between min and that
// when `jitter`, within [min, max]. Its defaults stand in for zeros: min 100 ms, max 10 s,
// factor 2; min ≥ max waits max. A factor below 1 waits min every time.
struct GoBackoff {
  std::chrono::nanoseconds min{std::chrono::milliseconds(100)};
  std::chrono::nanoseconds max{std::chrono::seconds(10)};
  double factor = 2;
  bool jitter = true;
  // `random` uniform in [0, 1).
  std::chrono::nanoseconds ForAttempt(int attempt, double random) const;
};

// How long the start waits for Redis to answer PING (REDIS_STARTUP_*): backoff from `initial`,
// doubling, jittered, at most `max` apart; giving up after `max_elapsed` (0: never).
struct StartupBackoff {
  std::chrono::nanoseconds initial{std::chrono::seconds(1)};
  std::chrono::nanoseconds max{std::chrono::seconds(30)};
  std::chrono::nanoseconds max_elapsed{0};
  // The wait before try `attempt` (0-based) with `random` uniform in [0, 1): upstream's
  // jpillora/backoff, initial·2^attempt, jittered down to no less than `initial`, at most `max`.
  std::chrono::nanoseconds Wait(int attempt, double random) const;
};

// What /healthcheck needs besides "not draining" (upstream's health components).
enum class ConfigHealth { kIgnored, kNeedsADomain };     // HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED
enum class RedisHealth { kIgnored, kNeedsAConnection };  // REDIS_HEALTH_CHECK_ACTIVE_CONNECTION

// How gRPC is served besides its listener (upstream's server_impl.go).
struct UpstreamGrpc {
  std::string unix_socket;                          // GRPC_UDS: instead of GRPC_HOST:GRPC_PORT
  std::optional<GrpcTls> tls;                       // GRPC_SERVER_USE_TLS and its files
  std::chrono::milliseconds max_connection_age{0};  // 0: never
  std::chrono::milliseconds max_connection_age_grace{0};  // 0: no bound
};

// What the xDS config client needs (xds_client.h; upstream's CONFIG_GRPC_XDS_* and
// XDS_CLIENT_* variables).
struct XdsSettings {
  std::string server_url = "localhost:18000";  // a gRPC target: host:port
  std::string node_id = "default";
  // "key=value,key2=value2": the node's metadata (entries without '=' are skipped, as upstream).
  std::string node_metadata;
  // Sent with the stream; names lower-cased, as Go's metadata.New does.
  std::vector<std::pair<std::string, std::string>> headers;
  // TLS to the server: its CA added to the system's roots (as upstream's TlsConfigFromFiles),
  // the name checked (the SAN, else the URL's host), a client certificate when both are given.
  bool use_tls = false;
  std::string client_cert_file;
  std::string client_key_file;
  std::string server_ca_file;
  std::string server_san;
  // Between a broken stream and the next dial: jpillora/backoff as upstream configures it
  // (Min, Max, Factor = XDS_CLIENT_BACKOFF_RANDOM_FACTOR, Jitter). With upstream's defaults
  // (factor 0.5) every wait is the initial interval.
  GoBackoff backoff{std::chrono::seconds(10), std::chrono::seconds(60), 0.5, true};
  int max_receive_bytes = 0;  // 0: gRPC's default (4 MiB)
  // MERGE_DOMAIN_CONFIG: the resources' domains merged as the files' are.
  DomainFiles domains = DomainFiles::kOneFileEach;
};

enum class ConfigSource { kFile, kXds };

struct UpstreamMode {
  Listener http;  // HOST:PORT
  Listener grpc;  // GRPC_HOST:GRPC_PORT
  UpstreamGrpc grpc_serving;
  Listener debug;  // DEBUG_HOST:DEBUG_PORT
  // floodgate's store URL for the Redis the REDIS_* variables describe.
  std::string store_url;
  // REDIS_PERSECOND=true: the store of upstream's counters of SECOND limits (REDIS_PERSECOND_*
  // as REDIS_* describe the other); empty: the one store.
  std::string per_second_store_url;
  RlsSettings rls;
  LogLevel log_level = LogLevel::kWarn;
  LogFormat log_format = LogFormat::kText;
  ConfigHealth config_health = ConfigHealth::kIgnored;
  RedisHealth redis_health = RedisHealth::kIgnored;
  StartupBackoff redis_startup;
  // CONFIG_TYPE: the runtime directory's files, or an xDS server (xds_client.h) as `xds` says.
  ConfigSource config_source = ConfigSource::kFile;
  XdsSettings xds;
  // FORCE_START_WITHOUT_INITIAL_CONFIG: with xDS, open the ports before the first response.
  bool force_start_without_config = false;
  StatsSettings stats;  // USE_STATSD, USE_DOG_STATSD, USE_PROMETHEUS, DISABLE_STATS...
};

// The stats settings `env` asks for (runner.go's choice of sink and its settings); an error
// names the variable, as upstream's start fails on it.
absl::StatusOr<StatsSettings> StatsSettingsFrom(const UpstreamEnv& env);

// The mode `env` asks for; an error names the variable whose value cannot be run (memcache, xDS,
// a port out of range...), as upstream's start fails on it.
absl::StatusOr<UpstreamMode> UpstreamModeFrom(const UpstreamEnv& env);

// The xDS client's settings from CONFIG_GRPC_XDS_* and XDS_CLIENT_*: an error names the variable.
absl::StatusOr<XdsSettings> XdsSettingsFrom(const UpstreamEnv& env);

// LOG_LEVEL as logrus' ParseLevel reads it (any case); an error for other text.
absl::StatusOr<LogLevel> ParseLogLevel(std::string_view text);

}  // namespace floodgate::server::rls

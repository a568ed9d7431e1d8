#pragma once

// What the `ratelimit` command (upstream mode) runs with, decided from upstream's environment.
//
// docs/envoy.md, "Two ways to run it". Everything comes from the variables of upstream_settings.h
// with upstream's defaults: the listeners, the Redis store, the config directory, logging, health.

#include <absl/status/statusor.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "server/rls/engine.h"
#include "server/rls/upstream_settings.h"

namespace floodgate::server::rls {

struct Listener {
  std::string host;
  std::uint16_t port = 0;
};

// logrus' levels, as LOG_LEVEL names them.
enum class LogLevel { kFatal, kError, kWarn, kInfo, kDebug, kTrace };
enum class LogFormat { kText, kJson };

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

struct UpstreamMode {
  Listener http;   // HOST:PORT
  Listener grpc;   // GRPC_HOST:GRPC_PORT
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
};

// The mode `env` asks for; an error names the variable whose value cannot be run (memcache, xDS,
// a port out of range...), as upstream's start fails on it.
absl::StatusOr<UpstreamMode> UpstreamModeFrom(const UpstreamEnv& env);

// LOG_LEVEL as logrus' ParseLevel reads it (any case); an error for other text.
absl::StatusOr<LogLevel> ParseLogLevel(std::string_view text);

}  // namespace floodgate::server::rls

// Upstream's environment variables: Go's parsers, the table (every row exercised), docs/envoy.md.
//
// The table in src/server/rls/upstream_variables.cc must hold exactly upstream's settings.go
// variables (plus those its libraries read), each row set here at least once: its effect on what
// `ratelimit` runs, or its refusal by name. docs/envoy.md carries the table as the code renders it.

#include "server/rls/upstream_settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "server/rls/config.h"
#include "server/rls/debug_service.h"
#include "server/rls/upstream_mode.h"

namespace floodgate::server::rls {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

// ---- Go's parsers, as envconfig calls them ----

TEST(GoParsers, BoolIsStrconvParseBool) {
  for (const char* yes : {"1", "t", "T", "TRUE", "true", "True"}) EXPECT_TRUE(*ParseGoBool(yes));
  for (const char* no : {"0", "f", "F", "FALSE", "false", "False"}) EXPECT_FALSE(*ParseGoBool(no));
  for (const char* bad : {"", "yes", "on", " true", "tRUE", "2"}) {
    EXPECT_FALSE(ParseGoBool(bad).ok()) << bad;
  }
}

TEST(GoParsers, IntTakesBasePrefixesAsParseIntWithBaseZero) {
  EXPECT_EQ(*ParseGoInt("8080"), 8080);
  EXPECT_EQ(*ParseGoInt("0x1F90"), 8080);
  EXPECT_EQ(*ParseGoInt("0X1f90"), 8080);
  EXPECT_EQ(*ParseGoInt("0o17"), 15);
  EXPECT_EQ(*ParseGoInt("010"), 8) << "a leading 0 is octal";
  EXPECT_EQ(*ParseGoInt("0b101"), 5);
  EXPECT_EQ(*ParseGoInt("0"), 0);
  EXPECT_EQ(*ParseGoInt("-12"), -12);
  EXPECT_EQ(*ParseGoInt("+12"), 12);
  EXPECT_EQ(*ParseGoInt("1_000"), 1000) << "Go's digit separators";
  EXPECT_EQ(*ParseGoInt("0x_1F"), 31);
  EXPECT_EQ(*ParseGoInt("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(*ParseGoInt("-9223372036854775808"), INT64_MIN);
  for (const char* bad : {"", "08080", "0x", "1__0", "_1", "1_", " 8080", "8080 ", "1e3", "12a",
                          "9223372036854775808", "0b102", "+", "-"}) {
    EXPECT_FALSE(ParseGoInt(bad).ok()) << bad;
  }
}

TEST(GoParsers, DurationIsTimeParseDuration) {
  EXPECT_EQ(*ParseGoDuration("0"), nanoseconds(0));
  EXPECT_EQ(*ParseGoDuration("300ms"), milliseconds(300));
  EXPECT_EQ(*ParseGoDuration("1.5h"), std::chrono::minutes(90));
  EXPECT_EQ(*ParseGoDuration("1h30m"), std::chrono::minutes(90));
  EXPECT_EQ(*ParseGoDuration("150us"), std::chrono::microseconds(150));
  EXPECT_EQ(*ParseGoDuration("150\xc2\xb5s"), std::chrono::microseconds(150));
  EXPECT_EQ(*ParseGoDuration("-2s"), seconds(-2));
  EXPECT_EQ(*ParseGoDuration(".5s"), milliseconds(500));
  EXPECT_EQ(*ParseGoDuration("1ns"), nanoseconds(1));
  for (const char* bad : {"", "10", "1d", "s", ".s", "1 s", "1S", "-", "3000000h"}) {
    EXPECT_FALSE(ParseGoDuration(bad).ok()) << bad;
  }
}

TEST(GoParsers, FloatIsParseFloat) {
  EXPECT_DOUBLE_EQ(*ParseGoFloat("0.8", 32), 0.8);
  EXPECT_DOUBLE_EQ(*ParseGoFloat("1e-1", 64), 0.1);
  EXPECT_DOUBLE_EQ(*ParseGoFloat(".5", 64), 0.5);
  EXPECT_DOUBLE_EQ(*ParseGoFloat("5.", 64), 5.0);
  EXPECT_DOUBLE_EQ(*ParseGoFloat("0x1p-2", 64), 0.25);
  EXPECT_TRUE(std::isinf(*ParseGoFloat("+Inf", 64)));
  for (const char* bad : {"", "abc", "1,5", " 1", "1e", "0x1", "1e40"}) {
    EXPECT_FALSE(ParseGoFloat(bad, 32).ok()) << bad;
  }
}

TEST(GoParsers, ListsAndMapsSplitAsEnvconfig) {
  EXPECT_EQ(std::get<std::vector<std::string>>(*ParseEnvValue(EnvType::kList, "a, b,")),
            (std::vector<std::string>{"a", " b", ""}))
      << "split on ',', untrimmed";
  EXPECT_TRUE(std::get<std::vector<std::string>>(*ParseEnvValue(EnvType::kList, "  ")).empty());
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(std::get<Pairs>(*ParseEnvValue(EnvType::kMap, "env:prod,team:rl")),
            (Pairs{{"env", "prod"}, {"team", "rl"}}));
  EXPECT_TRUE(std::get<Pairs>(*ParseEnvValue(EnvType::kMap, "")).empty());
  const auto url = ParseEnvValue(EnvType::kMap, "url:http://x");
  ASSERT_FALSE(url.ok()) << "a value holding ':' is not one item (strings.Split)";
  EXPECT_THAT(std::string(url.status().message()), HasSubstr("invalid map item"));
}

// ---- the table ----

// Upstream's settings.go at f2fb15770f7f, every `envconfig:` tag in order.
constexpr const char* kSettingsGo[] = {"HOST",
                                       "PORT",
                                       "DEBUG_HOST",
                                       "DEBUG_PORT",
                                       "GRPC_UDS",
                                       "GRPC_HOST",
                                       "GRPC_PORT",
                                       "GRPC_MAX_CONNECTION_AGE",
                                       "GRPC_MAX_CONNECTION_AGE_GRACE",
                                       "GRPC_SERVER_USE_TLS",
                                       "GRPC_SERVER_TLS_CERT",
                                       "GRPC_SERVER_TLS_KEY",
                                       "GRPC_CLIENT_TLS_CACERT",
                                       "GRPC_CLIENT_TLS_SAN",
                                       "LOG_LEVEL",
                                       "LOG_FORMAT",
                                       "CONFIG_TYPE",
                                       "FORCE_START_WITHOUT_INITIAL_CONFIG",
                                       "CONFIG_GRPC_XDS_NODE_ID",
                                       "CONFIG_GRPC_XDS_NODE_METADATA",
                                       "CONFIG_GRPC_XDS_SERVER_URL",
                                       "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
                                       "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
                                       "CONFIG_GRPC_XDS_SERVER_USE_TLS",
                                       "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
                                       "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
                                       "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
                                       "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
                                       "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
                                       "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
                                       "XDS_CLIENT_BACKOFF_RANDOM_FACTOR",
                                       "XDS_CLIENT_BACKOFF_JITTER",
                                       "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
                                       "USE_DOG_STATSD",
                                       "USE_DOG_STATSD_MOGRIFIERS",
                                       "USE_STATSD",
                                       "STATSD_HOST",
                                       "STATSD_PORT",
                                       "EXTRA_TAGS",
                                       "STATS_FLUSH_INTERVAL",
                                       "DISABLE_STATS",
                                       "USE_PROMETHEUS",
                                       "PROMETHEUS_ADDR",
                                       "PROMETHEUS_PATH",
                                       "PROMETHEUS_MAPPER_YAML",
                                       "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS",
                                       "RUNTIME_ROOT",
                                       "RUNTIME_SUBDIRECTORY",
                                       "RUNTIME_APPDIRECTORY",
                                       "RUNTIME_IGNOREDOTFILES",
                                       "RUNTIME_WATCH_ROOT",
                                       "EXPIRATION_JITTER_MAX_SECONDS",
                                       "LOCAL_CACHE_SIZE_IN_BYTES",
                                       "NEAR_LIMIT_RATIO",
                                       "CACHE_KEY_PREFIX",
                                       "BACKEND_TYPE",
                                       "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
                                       "LIMIT_RESPONSE_HEADERS_ENABLED",
                                       "LIMIT_LIMIT_HEADER",
                                       "LIMIT_REMAINING_HEADER",
                                       "LIMIT_RESET_HEADER",
                                       "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
                                       "REDIS_SOCKET_TYPE",
                                       "REDIS_TYPE",
                                       "REDIS_URL",
                                       "REDIS_POOL_SIZE",
                                       "REDIS_AUTH",
                                       "REDIS_TLS",
                                       "REDIS_TLS_CLIENT_CERT",
                                       "REDIS_TLS_CLIENT_KEY",
                                       "REDIS_TLS_CACERT",
                                       "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
                                       "REDIS_PIPELINE_WINDOW",
                                       "REDIS_PIPELINE_LIMIT",
                                       "REDIS_CLUSTER_PIPELINE_PARALLELISM",
                                       "REDIS_PERSECOND",
                                       "REDIS_PERSECOND_SOCKET_TYPE",
                                       "REDIS_PERSECOND_TYPE",
                                       "REDIS_PERSECOND_URL",
                                       "REDIS_PERSECOND_POOL_SIZE",
                                       "REDIS_PERSECOND_AUTH",
                                       "REDIS_PERSECOND_TLS",
                                       "REDIS_SENTINEL_AUTH",
                                       "REDIS_PERSECOND_SENTINEL_AUTH",
                                       "REDIS_PERSECOND_PIPELINE_WINDOW",
                                       "REDIS_PERSECOND_PIPELINE_LIMIT",
                                       "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM",
                                       "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
                                       "REDIS_TIMEOUT",
                                       "REDIS_PERSECOND_TIMEOUT",
                                       "REDIS_POOL_ON_EMPTY_BEHAVIOR",
                                       "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR",
                                       "REDIS_STARTUP_INITIAL_INTERVAL",
                                       "REDIS_STARTUP_MAX_INTERVAL",
                                       "REDIS_STARTUP_MAX_ELAPSED_TIME",
                                       "MEMCACHE_HOST_PORT",
                                       "MEMCACHE_MAX_IDLE_CONNS",
                                       "MEMCACHE_SRV",
                                       "MEMCACHE_SRV_REFRESH",
                                       "MEMCACHE_TLS",
                                       "MEMCACHE_TLS_CLIENT_CERT",
                                       "MEMCACHE_TLS_CLIENT_KEY",
                                       "MEMCACHE_TLS_CACERT",
                                       "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION",
                                       "SHADOW_MODE",
                                       "QUOTA_MODE",
                                       "RESPONSE_DYNAMIC_METADATA",
                                       "MERGE_DOMAIN_CONFIG",
                                       "TRACING_ENABLED",
                                       "TRACING_SERVICE_NAME",
                                       "TRACING_SERVICE_NAMESPACE",
                                       "TRACING_SERVICE_INSTANCE_ID",
                                       "TRACING_EXPORTER_PROTOCOL",
                                       "TRACING_SAMPLING_RATE"};

// Read by upstream's libraries (spec 1.3), and Envoy Gateway's variable upstream ignores.
constexpr const char* kOutsideSettingsGo[] = {"STATSD_PROTOCOL",
                                              "GOSTATS_FLUSH_INTERVAL_SECONDS",
                                              "GOSTATS_LOGGING_SINK_DISABLED",
                                              "DOG_STATSD_MOGRIFIER_*",
                                              "DD_*",
                                              "OTEL_*",
                                              "GRPC_SERVER_TLS_CA_CERT"};

TEST(UpstreamVariables, AreExactlyUpstreamsEachOnce) {
  std::set<std::string> expected(std::begin(kSettingsGo), std::end(kSettingsGo));
  ASSERT_EQ(expected.size(), 114u);
  expected.insert(std::begin(kOutsideSettingsGo), std::end(kOutsideSettingsGo));
  std::multiset<std::string> names;
  for (const UpstreamVariable& row : UpstreamVariables()) names.emplace(row.name);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected);
  EXPECT_EQ(names.size(), expected.size()) << "a name given twice";
  for (const UpstreamVariable& row : UpstreamVariables()) {
    if (row.support == Support::kRefused || row.support == Support::kIgnored ||
        row.support == Support::kMapped) {
      EXPECT_FALSE(row.floodgate.empty()) << row.name << " needs its reason";
    }
    if (row.support == Support::kRefused && row.accepts.has_value()) {
      EXPECT_TRUE(ParseEnvValue(row.type, *row.accepts).ok()) << row.name;
    }
  }
  // Every default reads, as upstream's panic would show otherwise.
  EXPECT_TRUE(UpstreamEnv::Read({}, UpstreamVariables()).ok());
}

// What a sample expects of its variable.
enum class Expect {
  kRefused,  // the start stops, naming the variable
  kEffect,   // accepted, and what `ratelimit` runs with differs
  kNoEffect  // accepted, and nothing it runs with differs (ignored as upstream, or no knob)
};

struct Sample {
  std::string name;
  std::string value;
  Expect expect;
  Environment extra = {};  // besides it, in both runs
};

// One sample at least for every row of the table (checked below).
std::vector<Sample> Samples() {
  using enum Expect;
  const Environment tcp = {{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "redis:6379"}};
  // A per-second Redis asked for: on its default unix socket, or over TCP.
  const Environment per_second = {{"REDIS_PERSECOND", "true"}};
  const Environment per_second_tcp = {{"REDIS_PERSECOND", "true"},
                                      {"REDIS_PERSECOND_SOCKET_TYPE", "tcp"},
                                      {"REDIS_PERSECOND_URL", "ps:6379"}};
  const Environment prometheus = {{"USE_STATSD", "false"}, {"USE_PROMETHEUS", "true"}};
  const Environment dogstatsd = {{"USE_STATSD", "false"}, {"USE_DOG_STATSD", "true"}};
  Environment mogrifier_a = dogstatsd;
  mogrifier_a["DOG_STATSD_MOGRIFIER_A_PATTERN"] = "^ratelimit\\.service\\.(.*)$";
  mogrifier_a["DOG_STATSD_MOGRIFIER_A_NAME"] = "rl.$1";
  Environment mogrifier_on = mogrifier_a;
  mogrifier_on["USE_DOG_STATSD_MOGRIFIERS"] = "a";
  const Environment xds = {{"CONFIG_TYPE", "GRPC_XDS_SOTW"}};
  const Environment tls = {
      {"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "redis:6379"}, {"REDIS_TLS", "true"}};
  const Environment grpc_tls_files = {{"GRPC_SERVER_TLS_CERT", "/certs/tls.crt"},
                                      {"GRPC_SERVER_TLS_KEY", "/certs/tls.key"}};
  Environment grpc_tls = grpc_tls_files;
  grpc_tls["GRPC_SERVER_USE_TLS"] = "true";
  return {
      // The service.
      {"HOST", "127.0.0.1", kEffect},
      {"PORT", "9090", kEffect},
      {"PORT", "0x1F90", kNoEffect},  // 8080
      {"PORT", "08080", kRefused},    // octal without 8s
      {"PORT", "", kRefused},         // set but empty is set
      {"PORT", "70000", kRefused},
      {"DEBUG_HOST", "127.0.0.1", kEffect},
      {"DEBUG_PORT", "6071", kEffect},
      {"GRPC_HOST", "::1", kEffect},
      {"GRPC_PORT", "0o17", kEffect},
      {"LOG_LEVEL", "Info", kEffect},
      {"LOG_LEVEL", "verbose", kRefused},
      {"LOG_FORMAT", "JSON", kEffect},
      {"LOG_FORMAT", "logfmt", kNoEffect},  // anything but json is text
      {"CONFIG_TYPE", "FILE", kNoEffect},
      {"CONFIG_TYPE", "GRPC_XDS_SOTW", kEffect},
      {"CONFIG_TYPE", "file", kRefused},  // exact, as upstream
      {"FORCE_START_WITHOUT_INITIAL_CONFIG", "true", kNoEffect},  // files load first anyway
      {"FORCE_START_WITHOUT_INITIAL_CONFIG", "true", kEffect, xds},
      {"RUNTIME_ROOT", "/data", kEffect},
      {"RUNTIME_SUBDIRECTORY", "ratelimit", kEffect},
      {"RUNTIME_APPDIRECTORY", "config", kNoEffect},
      {"RUNTIME_APPDIRECTORY", "rules", kRefused},
      {"RUNTIME_IGNOREDOTFILES", "T", kEffect},
      {"RUNTIME_WATCH_ROOT", "false", kNoEffect},
      {"RUNTIME_WATCH_ROOT", "no", kRefused},
      {"SHADOW_MODE", "1", kEffect},
      {"LIMIT_RESPONSE_HEADERS_ENABLED", "TRUE", kEffect},
      {"LIMIT_LIMIT_HEADER", "X-Limit", kEffect},
      {"LIMIT_LIMIT_HEADER", "", kRefused},
      {"LIMIT_REMAINING_HEADER", "X-Remaining", kEffect},
      {"LIMIT_RESET_HEADER", "X-Reset", kEffect},
      {"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true", kEffect},
      {"BACKEND_TYPE", "redis", kNoEffect},
      {"BACKEND_TYPE", "", kNoEffect},
      {"BACKEND_TYPE", "memcache", kRefused},
      {"BACKEND_TYPE", "dynamo", kRefused},
      // Redis.
      {"REDIS_SOCKET_TYPE", "tcp", kEffect, {{"REDIS_URL", "redis:6379"}}},
      {"REDIS_SOCKET_TYPE", "tcp4", kEffect, {{"REDIS_URL", "redis:6379"}}},
      {"REDIS_SOCKET_TYPE", "TCP", kRefused},  // Go's net names are lower case
      {"REDIS_TYPE", "Cluster", kEffect, {{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "a:1,b:2"}}},
      {"REDIS_TYPE", "ring", kRefused},
      {"REDIS_URL", "/run/redis.sock", kEffect},
      {"REDIS_URL", "", kRefused},
      {"REDIS_POOL_SIZE", "0x10", kEffect},
      {"REDIS_POOL_SIZE", "0", kRefused},
      {"REDIS_AUTH", "user:p@ss", kEffect},
      {"REDIS_TLS", "true", kEffect, tcp},
      {"REDIS_TLS", "true", kRefused},  // on the default unix socket
      {"REDIS_TLS_CLIENT_CERT", "/certs/tls.crt", kEffect, tls},
      {"REDIS_TLS_CLIENT_CERT", "/certs/tls.crt", kNoEffect, tcp},  // without TLS, as upstream
      {"REDIS_TLS_CLIENT_KEY", "/certs/tls.key", kEffect, tls},
      {"REDIS_TLS_CACERT", "/certs/ca.crt", kEffect, tls},
      {"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "false", kNoEffect},
      {"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true", kRefused},
      {"REDIS_PIPELINE_WINDOW", "150us", kNoEffect},
      {"REDIS_PIPELINE_WINDOW", "150", kRefused},
      {"REDIS_PIPELINE_LIMIT", "8", kNoEffect},
      {"REDIS_CLUSTER_PIPELINE_PARALLELISM", "4", kNoEffect},
      {"REDIS_CLUSTER_PIPELINE_PARALLELISM", "-1", kRefused},
      {"REDIS_SENTINEL_AUTH",
       "admin:s3cret",
       kEffect,
       {{"REDIS_TYPE", "sentinel"}, {"REDIS_URL", "mymaster,s1:26379"}}},
      {"REDIS_SENTINEL_AUTH", "s3cret", kNoEffect},  // not a sentinel: unused, as upstream
      {"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "true", kEffect},
      {"REDIS_TIMEOUT", "2s", kEffect},
      {"REDIS_POOL_ON_EMPTY_BEHAVIOR", "wait", kNoEffect},
      {"REDIS_POOL_ON_EMPTY_BEHAVIOR", "Create", kRefused},
      {"REDIS_POOL_ON_EMPTY_BEHAVIOR", "ERROR", kRefused},
      {"REDIS_STARTUP_INITIAL_INTERVAL", "2s", kEffect},
      {"REDIS_STARTUP_MAX_INTERVAL", "1m", kEffect},
      {"REDIS_STARTUP_MAX_ELAPSED_TIME", "30s", kEffect},
      // Counting.
      {"EXPIRATION_JITTER_MAX_SECONDS", "300", kNoEffect},
      {"EXPIRATION_JITTER_MAX_SECONDS", "0", kEffect},
      {"EXPIRATION_JITTER_MAX_SECONDS", "5m", kRefused},
      {"LOCAL_CACHE_SIZE_IN_BYTES", "1048576", kEffect},
      {"LOCAL_CACHE_SIZE_IN_BYTES", "-1", kRefused},
      {"NEAR_LIMIT_RATIO", "0.9", kEffect},
      {"NEAR_LIMIT_RATIO", "0.80", kNoEffect},
      {"NEAR_LIMIT_RATIO", "most", kRefused},
      {"CACHE_KEY_PREFIX", "rl:", kEffect},
      {"CACHE_KEY_PREFIX", "", kNoEffect},
      {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true", kEffect},
      {"REDIS_PERSECOND", "true", kEffect, {{"REDIS_PERSECOND_SOCKET_TYPE", "tcp"},
                                            {"REDIS_PERSECOND_URL", "ps:6379"}}},
      {"REDIS_PERSECOND", "false", kNoEffect},
      // REDIS_PERSECOND_*: read only with REDIS_PERSECOND=true, as their REDIS_ twins.
      {"REDIS_PERSECOND_SOCKET_TYPE", "tcp", kNoEffect},
      {"REDIS_PERSECOND_SOCKET_TYPE", "tcp", kEffect, per_second},
      {"REDIS_PERSECOND_SOCKET_TYPE", "udp", kRefused, per_second},
      {"REDIS_PERSECOND_TYPE", "cluster", kNoEffect},
      {"REDIS_PERSECOND_TYPE", "cluster", kEffect, per_second_tcp},
      {"REDIS_PERSECOND_URL", "redis-ps:6379", kNoEffect},
      {"REDIS_PERSECOND_URL", "redis-ps:6379", kEffect, per_second_tcp},
      {"REDIS_PERSECOND_POOL_SIZE", "5", kNoEffect},
      {"REDIS_PERSECOND_POOL_SIZE", "5", kEffect, per_second},
      {"REDIS_PERSECOND_POOL_SIZE", "five", kRefused},
      {"REDIS_PERSECOND_AUTH", "secret", kNoEffect},
      {"REDIS_PERSECOND_AUTH", "secret", kEffect, per_second},
      {"REDIS_PERSECOND_TLS", "true", kNoEffect},
      {"REDIS_PERSECOND_TLS", "true", kEffect, per_second_tcp},
      {"REDIS_PERSECOND_SENTINEL_AUTH", "secret", kNoEffect},
      {"REDIS_PERSECOND_SENTINEL_AUTH",
       "secret",
       kEffect,
       {{"REDIS_PERSECOND", "true"},
        {"REDIS_PERSECOND_TYPE", "sentinel"},
        {"REDIS_PERSECOND_URL", "mymaster,s1:26379"}}},
      {"REDIS_PERSECOND_PIPELINE_WINDOW", "1ms", kNoEffect},
      {"REDIS_PERSECOND_PIPELINE_LIMIT", "2", kNoEffect},
      {"REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "0", kNoEffect},
      {"REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "-1", kRefused, per_second},
      {"REDIS_PERSECOND_TIMEOUT", "1s", kNoEffect},
      {"REDIS_PERSECOND_TIMEOUT", "1s", kEffect, per_second},
      {"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", "WAIT", kNoEffect},
      {"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", "ERROR", kRefused, per_second},
      // Stats (USE_STATSD is true by default: the other sinks need it false, as upstream).
      {"USE_STATSD", "true", kNoEffect},
      {"USE_STATSD", "false", kEffect},
      {"STATSD_HOST", "statsd", kEffect},
      {"STATSD_PORT", "9125", kEffect},
      {"STATSD_PORT", "statsd", kRefused},
      {"STATSD_PORT", "70000", kRefused},
      {"STATSD_PROTOCOL", "udp", kEffect},
      {"STATSD_PROTOCOL", "", kNoEffect},  // gostats: empty is tcp
      {"STATSD_PROTOCOL", "quic", kRefused},
      {"GOSTATS_FLUSH_INTERVAL_SECONDS", "1", kNoEffect},
      {"GOSTATS_LOGGING_SINK_DISABLED", "true", kNoEffect},
      {"EXTRA_TAGS", "env:prod", kEffect},
      {"EXTRA_TAGS", "url:http://x", kRefused},
      {"STATS_FLUSH_INTERVAL", "1s", kEffect},
      {"STATS_FLUSH_INTERVAL", "0", kRefused},
      {"DISABLE_STATS", "true", kEffect},
      {"USE_PROMETHEUS", "true", kRefused},  // with USE_STATSD's true: two sinks
      {"USE_PROMETHEUS", "true", kEffect, {{"USE_STATSD", "false"}}},
      {"PROMETHEUS_ADDR", ":19001", kNoEffect},
      {"PROMETHEUS_ADDR", ":19001", kEffect, prometheus},
      {"PROMETHEUS_ADDR", "19001", kRefused, prometheus},
      {"PROMETHEUS_PATH", "/m", kEffect, prometheus},
      {"PROMETHEUS_MAPPER_YAML", "/etc/statsd-exporter/conf.yaml", kRefused},
      {"PROMETHEUS_MAPPER_YAML", "", kNoEffect},
      {"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "true", kEffect, prometheus},
      {"USE_DOG_STATSD", "true", kRefused},
      {"USE_DOG_STATSD", "true", kEffect, {{"USE_STATSD", "false"}}},
      {"USE_DOG_STATSD_MOGRIFIERS", "a", kEffect, mogrifier_a},
      {"USE_DOG_STATSD_MOGRIFIERS", "a,b", kRefused, mogrifier_a},  // b has no pattern
      {"DOG_STATSD_MOGRIFIER_A_PATTERN", "^ratelimit\\.(.*)$", kEffect, mogrifier_on},
      {"DOG_STATSD_MOGRIFIER_A_PATTERN", "", kRefused, mogrifier_on},
      {"DD_ENV", "prod", kNoEffect},
      {"DD_ENV", "prod", kEffect, dogstatsd},
      // gRPC.
      {"GRPC_UDS", "/tmp/ratelimit.sock", kEffect},
      {"GRPC_UDS", "", kNoEffect},
      {"GRPC_MAX_CONNECTION_AGE", "1m", kEffect},
      {"GRPC_MAX_CONNECTION_AGE", "24h", kNoEffect},  // the default
      {"GRPC_MAX_CONNECTION_AGE", "-1s", kRefused},
      {"GRPC_MAX_CONNECTION_AGE_GRACE", "10s", kEffect},
      {"GRPC_MAX_CONNECTION_AGE_GRACE", "-1s", kRefused},
      {"GRPC_SERVER_USE_TLS", "true", kRefused},  // without the files
      {"GRPC_SERVER_USE_TLS", "true", kEffect, grpc_tls_files},
      {"GRPC_SERVER_USE_TLS", "false", kNoEffect},
      {"GRPC_SERVER_TLS_CERT", "/certs/tls.crt", kNoEffect},  // read only with TLS on
      {"GRPC_SERVER_TLS_CERT", "/certs/other.crt", kEffect, grpc_tls},
      {"GRPC_SERVER_TLS_KEY", "/certs/tls.key", kNoEffect},
      {"GRPC_SERVER_TLS_KEY", "/other/tls.key", kRefused, grpc_tls},  // not beside the cert
      {"GRPC_SERVER_TLS_KEY", "/certs/other.key", kEffect, grpc_tls},
      {"GRPC_CLIENT_TLS_CACERT", "/certs/ca.crt", kNoEffect},
      {"GRPC_CLIENT_TLS_CACERT", "/certs/ca.crt", kEffect, grpc_tls},
      {"GRPC_CLIENT_TLS_SAN", "envoy", kNoEffect},
      {"GRPC_CLIENT_TLS_SAN", "envoy", kEffect, grpc_tls},
      {"GRPC_SERVER_TLS_CA_CERT", "/certs/ca.crt", kNoEffect},  // Envoy Gateway's
      {"QUOTA_MODE", "true", kEffect},
      {"RESPONSE_DYNAMIC_METADATA", "true", kEffect},
      {"MERGE_DOMAIN_CONFIG", "true", kEffect},
      {"MERGE_DOMAIN_CONFIG", "false", kNoEffect},
      // xDS: read only with CONFIG_TYPE=GRPC_XDS_SOTW.
      {"CONFIG_GRPC_XDS_NODE_ID", "test-node-id", kNoEffect},
      {"CONFIG_GRPC_XDS_NODE_ID", "test-node-id", kEffect, xds},
      {"CONFIG_GRPC_XDS_NODE_METADATA", "a=b", kNoEffect},
      {"CONFIG_GRPC_XDS_NODE_METADATA", "a=b", kEffect, xds},
      {"CONFIG_GRPC_XDS_SERVER_URL", "ratelimit-xds-config-server:18000", kNoEffect},
      {"CONFIG_GRPC_XDS_SERVER_URL", "ratelimit-xds-config-server:18000", kEffect, xds},
      {"CONFIG_GRPC_XDS_SERVER_URL", "", kRefused, xds},
      {"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "1s", kNoEffect, xds},
      {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "k:v", kNoEffect},
      {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "k:v", kEffect, xds},
      {"CONFIG_GRPC_XDS_SERVER_USE_TLS", "true", kNoEffect},
      {"CONFIG_GRPC_XDS_SERVER_USE_TLS", "true", kEffect, xds},
      {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/certs/tls.crt", kNoEffect},
      {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/certs/tls.crt", kEffect, xds},
      {"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/certs/tls.key", kNoEffect},
      {"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/certs/tls.key", kEffect, xds},
      {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/certs/ca.crt", kNoEffect},
      {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/certs/ca.crt", kEffect, xds},
      {"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "eg", kNoEffect},
      {"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "eg", kEffect, xds},
      {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "1s", kNoEffect},
      {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "1s", kEffect, xds},
      {"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "5s", kNoEffect},
      {"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "5s", kEffect, xds},
      {"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "2", kNoEffect},
      {"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "2", kEffect, xds},
      {"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "two", kRefused},
      {"XDS_CLIENT_BACKOFF_JITTER", "false", kNoEffect},
      {"XDS_CLIENT_BACKOFF_JITTER", "false", kEffect, xds},
      {"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "8388608", kNoEffect},
      {"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "8388608", kEffect, xds},
      {"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "-1", kRefused, xds},
      // memcache: read only with BACKEND_TYPE=memcache.
      {"MEMCACHE_HOST_PORT", "memcached:11211", kNoEffect},
      {"MEMCACHE_MAX_IDLE_CONNS", "4", kNoEffect},
      {"MEMCACHE_MAX_IDLE_CONNS", "", kRefused},
      {"MEMCACHE_SRV", "_memcache._tcp.example", kNoEffect},
      {"MEMCACHE_SRV_REFRESH", "1m", kNoEffect},
      {"MEMCACHE_TLS", "true", kNoEffect},
      {"MEMCACHE_TLS_CLIENT_CERT", "/c", kNoEffect},
      {"MEMCACHE_TLS_CLIENT_KEY", "/k", kNoEffect},
      {"MEMCACHE_TLS_CACERT", "/ca", kNoEffect},
      {"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "true", kNoEffect},
      // Tracing.
      {"TRACING_ENABLED", "true", kRefused},
      {"TRACING_ENABLED", "false", kNoEffect},
      {"TRACING_SERVICE_NAME", "envoy-ratelimit", kNoEffect},
      {"TRACING_SERVICE_NAMESPACE", "eg", kNoEffect},
      {"TRACING_SERVICE_INSTANCE_ID", "pod-1", kNoEffect},
      {"TRACING_EXPORTER_PROTOCOL", "grpc", kNoEffect},
      {"TRACING_SAMPLING_RATE", "0.5", kNoEffect},
      {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", kNoEffect},
  };
}

std::string RenderStats(const StatsSettings& s) {
  std::string out =
      fmt::format(" stats={} {}:{} {} interval={} prom={}:{}{} ms={}", static_cast<int>(s.sink),
                  s.host, s.port, static_cast<int>(s.transport), s.flush_interval.count(),
                  s.prometheus_host, s.prometheus_port, s.prometheus_path, s.response_time_as_ms);
  for (const auto& [k, v] : s.tags) out += fmt::format(" tag {}={}", k, v);
  for (const Mogrifier& m : s.mogrifiers) out += fmt::format(" mogrifier {} {}", m.pattern, m.name);
  for (const std::string& tag : s.dogstatsd_tags) out += " dd " + tag;
  return out;
}

std::string Render(const UpstreamMode& m) {
  return fmt::format(
      "{}:{} {}:{} {}:{} {} root={} sub={} dot={} shadow={} headers={} {} {} {} unavailable={} "
      "log={} format={} config_health={} redis_health={} startup={} {} {} config={} force={} "
      "xds={} {} {} {} tls={} {} {} {} {} backoff={} {} {} {} max={} "
      "uds={} age={} grace={} grpc_tls={} quota={} metadata={} merge={} per_second={} "
      "prefix={} near={} jitter={} stop={} local_cache={}",
      m.http.host, m.http.port, m.grpc.host, m.grpc.port, m.debug.host, m.debug.port, m.store_url,
      m.rls.runtime_root, m.rls.runtime_subdirectory, m.rls.ignore_dotfiles, m.rls.global_shadow,
      m.rls.response_headers, m.rls.limit_header, m.rls.remaining_header, m.rls.reset_header,
      m.rls.unavailable_on_store_error, static_cast<int>(m.log_level),
      static_cast<int>(m.log_format), static_cast<int>(m.config_health),
      static_cast<int>(m.redis_health), m.redis_startup.initial.count(),
      m.redis_startup.max.count(), m.redis_startup.max_elapsed.count(),
      static_cast<int>(m.config_source), m.force_start_without_config, m.xds.server_url,
      m.xds.node_id, m.xds.node_metadata, fmt::join(m.xds.headers, ","), m.xds.use_tls,
      m.xds.client_cert_file, m.xds.client_key_file, m.xds.server_ca_file, m.xds.server_san,
      m.xds.backoff.min.count(), m.xds.backoff.max.count(), m.xds.backoff.factor,
      m.xds.backoff.jitter, m.xds.max_receive_bytes, m.grpc_serving.unix_socket,
      m.grpc_serving.max_connection_age.count(), m.grpc_serving.max_connection_age_grace.count(),
      m.grpc_serving.tls
          ? fmt::format("{},{},{},{}", m.grpc_serving.tls->cert_file, m.grpc_serving.tls->key_file,
                        m.grpc_serving.tls->client_ca_file, m.grpc_serving.tls->client_san)
          : "off",
      m.rls.global_quota, m.rls.dynamic_metadata, m.rls.merge_domains, m.per_second_store_url,
      m.rls.cache_key_prefix, m.rls.near_limit_ratio, m.rls.expiration_jitter_max_seconds,
      m.rls.stop_increment_when_over, m.rls.local_cache_bytes);
}

// Everything a mode says, its stats included.
std::string RenderAll(const UpstreamMode& m) { return Render(m) + RenderStats(m.stats); }

absl::StatusOr<UpstreamMode> ModeOf(const Environment& environment) {
  auto env = UpstreamEnv::Read(environment, UpstreamVariables());
  if (!env.ok()) return env.status();
  return UpstreamModeFrom(*env);
}

// Every row of the table: set, and its effect or its refusal by name.
TEST(UpstreamVariables, EveryRowSetHasItsEffectOrIsRefusedByName) {
  std::set<std::string> exercised;
  for (const Sample& sample : Samples()) {
    SCOPED_TRACE(fmt::format("{}=\"{}\"", sample.name, sample.value));
    Environment with = sample.extra;
    with[sample.name] = sample.value;
    const auto mode = ModeOf(with);
    const auto base = ModeOf(sample.extra);
    switch (sample.expect) {
      case Expect::kRefused:
        ASSERT_FALSE(mode.ok());
        EXPECT_THAT(std::string(mode.status().message()), HasSubstr(sample.name + "="));
        break;
      case Expect::kEffect:
        ASSERT_TRUE(mode.ok()) << mode.status();
        if (base.ok()) {
          EXPECT_NE(RenderAll(*mode), RenderAll(*base));
        }
        break;
      case Expect::kNoEffect:
        ASSERT_TRUE(mode.ok()) << mode.status();
        ASSERT_TRUE(base.ok()) << base.status();
        EXPECT_EQ(RenderAll(*mode), RenderAll(*base));
        break;
    }
    exercised.insert(sample.name);
  }
  for (const UpstreamVariable& row : UpstreamVariables()) {
    const std::string name(row.name);
    if (name.ends_with('*')) {
      const std::string prefix = name.substr(0, name.size() - 1);
      EXPECT_TRUE(std::any_of(exercised.begin(), exercised.end(),
                              [&](const std::string& e) { return e.starts_with(prefix); }))
          << name << " has no sample";
    } else {
      EXPECT_TRUE(exercised.contains(name)) << name << " has no sample";
    }
  }
}

// A refusal says why, and a refused row's "off" value passes.
TEST(UpstreamVariables, RefusalsNameTheVariableAndTheReason) {
  const auto mapper = ModeOf({{"PROMETHEUS_MAPPER_YAML", "/m.yaml"}});
  ASSERT_FALSE(mapper.ok());
  EXPECT_EQ(mapper.status().message(),
            "PROMETHEUS_MAPPER_YAML=\"/m.yaml\": not supported: only upstream's default mapping "
            "is built in: a mapper file is not read");
  const auto memcache = ModeOf({{"BACKEND_TYPE", "memcache"}});
  ASSERT_FALSE(memcache.ok());
  EXPECT_THAT(std::string(memcache.status().message()), HasSubstr("no memcached store"));
  const auto bad = ModeOf({{"SHADOW_MODE", "yes"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("SHADOW_MODE=\"yes\": "));
}

TEST(UpstreamMode, DefaultsAreUpstreams) {
  const auto mode = ModeOf({});
  ASSERT_TRUE(mode.ok()) << mode.status();
  EXPECT_EQ(mode->http.host, "0.0.0.0");
  EXPECT_EQ(mode->http.port, 8080);
  EXPECT_EQ(mode->grpc.port, 8081);
  EXPECT_EQ(mode->debug.port, 6070);
  EXPECT_EQ(mode->store_url, "redis+unix:///var/run/nutcracker/ratelimit.sock");
  EXPECT_EQ(mode->rls.runtime_root, "/srv/runtime_data/current");
  EXPECT_EQ(mode->log_level, LogLevel::kWarn);
  EXPECT_TRUE(mode->rls.unavailable_on_store_error) << "Envoy's failure_mode_deny decides";
  // docker-compose-example.yml's Redis.
  const auto compose = ModeOf({{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "redis:6379"}});
  ASSERT_TRUE(compose.ok());
  EXPECT_EQ(compose->store_url, "redis://redis:6379");
  const auto sentinel = ModeOf({{"REDIS_TYPE", "sentinel"},
                                {"REDIS_URL", "mymaster,s1:26379"},
                                {"REDIS_SENTINEL_AUTH", "admin:s3cret"},
                                {"REDIS_TIMEOUT", "2s"}});
  ASSERT_TRUE(sentinel.ok()) << sentinel.status();
  EXPECT_EQ(sentinel->store_url,
            "redis-sentinel://s1:26379/mymaster?connect_timeout=2000000us&sentinel_user=admin&"
            "sentinel_password=s3cret");
}

TEST(UpstreamMode, StartupBackoffIsJpillorasWithFactorTwo) {
  const StartupBackoff b{seconds(1), seconds(30), nanoseconds(0)};
  EXPECT_EQ(b.Wait(0, 0.7), seconds(1)) << "the first wait is the initial one";
  EXPECT_EQ(b.Wait(3, 0.0), seconds(1)) << "jitter reaches down to the initial wait";
  EXPECT_EQ(b.Wait(3, 0.5), milliseconds(4500));  // 1 + 0.5 * (8 - 1)
  EXPECT_EQ(b.Wait(10, 0.99), seconds(30)) << "capped";
  // REDIS_STARTUP_MAX_ELAPSED_TIME=0 retries for good: past attempt 1023, 2^attempt was
  // infinite and a jitter of 0 made the wait NaN (cast to an integer: undefined).
  EXPECT_EQ(b.Wait(5'000, 0.0), seconds(1));
  EXPECT_EQ(b.Wait(5'000, 0.5), seconds(30));
  EXPECT_EQ(b.Wait(std::numeric_limits<int>::max(), 0.0), seconds(1));
  EXPECT_EQ((StartupBackoff{seconds(5), seconds(2), nanoseconds(0)}.Wait(0, 0.5)), seconds(2));
}

// ---- /rlconfig and the debug port ----

TEST(RlConfig, DumpsAsUpstreamsConfigDump) {
  auto config = ParseRlsConfig({{"a.yaml", R"(domain: foo
descriptors:
  - key: k1
    value: v1
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: k2
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
    descriptors:
      - key: k3
        rate_limit: {unlimited: true}
)"}});
  ASSERT_TRUE(config.ok()) << config.status();
  // Upstream's own example (test/provider/xds_grpc_sotw_provider_test.go) is the first line.
  EXPECT_EQ((*config)->Dump(),
            "foo.k1_v1: unit=MINUTE requests_per_unit=3, shadow_mode: false, quota_mode: false\n"
            "foo.k2: unit=SECOND requests_per_unit=1, shadow_mode: true, quota_mode: false\n"
            "foo.k2.k3: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false\n");
}

class FixedConfigEngine final : public Engine {
 public:
  explicit FixedConfigEngine(std::shared_ptr<const RlsConfig> config)
      : config_(std::move(config)) {}
  void ShouldRateLimit(const pb::RateLimitRequest&, pb::RateLimitResponse*, RlsDone done) override {
    done(absl::UnimplementedError("not here"));
  }
  std::shared_ptr<const RlsConfig> CurrentConfig() const override { return config_; }

 private:
  std::shared_ptr<const RlsConfig> config_;
};

std::string Get(DebugService& debug, const std::string& target) {
  Request request(http::verb::get, target, 11);
  std::optional<Response> response;
  debug.Handle(request, boost::asio::ip::make_address("127.0.0.1"),
               [&](Response r) { response = std::move(r); });
  EXPECT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 200);
  return response.has_value() ? response->body : "";
}

TEST(DebugPort, ListsRlconfigAndStats) {
  auto config = ParseRlsConfig(
      {{"a.yaml",
        "domain: d\ndescriptors: [{key: k, rate_limit: {unit: hour, requests_per_unit: "
        "7}}]\n"}});
  ASSERT_TRUE(config.ok());
  FixedConfigEngine engine(*config);
  DebugService debug(engine, [] { return std::string("stats text\n"); });
  const std::string listing =
      "/rlconfig: print out the currently loaded configuration for debugging\n"
      "/stats: print out stats\n";
  EXPECT_EQ(Get(debug, "/"), listing);
  EXPECT_EQ(Get(debug, "/anything/else"), listing) << "Go's ServeMux sends the rest to /";
  EXPECT_EQ(Get(debug, "/rlconfig"),
            "d.k: unit=HOUR requests_per_unit=7, shadow_mode: false, quota_mode: false\n");
  EXPECT_EQ(Get(debug, "/stats"), "stats text\n");
  FixedConfigEngine none(nullptr);
  DebugService empty(none, {});
  EXPECT_EQ(Get(empty, "/rlconfig"), "") << "no config: an empty 200";
  EXPECT_EQ(Get(empty, "/stats"), "");
}

// ---- docs/envoy.md carries the table as the code renders it ----

TEST(UpstreamVariables, DocsCarryTheTable) {
  std::ifstream in(std::string(FLOODGATE_DOCS_DIR) + "/envoy.md");
  ASSERT_TRUE(in) << FLOODGATE_DOCS_DIR "/envoy.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const std::string begin =
      "<!-- upstream-variables: generated by UpstreamVariablesMarkdown() -->\n";
  const std::string end = "<!-- upstream-variables: end -->";
  const std::size_t from = doc.find(begin);
  const std::size_t to = doc.find(end);
  ASSERT_NE(from, std::string::npos) << "docs/envoy.md lacks the marker " << begin;
  ASSERT_NE(to, std::string::npos);
  const std::string table = doc.substr(from + begin.size(), to - from - begin.size());
  if (table != UpstreamVariablesMarkdown()) {
    const std::string expected = ::testing::TempDir() + "upstream_variables.md";
    std::ofstream(expected) << UpstreamVariablesMarkdown();
    ADD_FAILURE() << "docs/envoy.md's table differs from src/server/rls/upstream_variables.cc: "
                     "put "
                  << expected << " between its markers";
  }
}

}  // namespace
}  // namespace floodgate::server::rls

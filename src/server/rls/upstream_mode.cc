// Upstream's environment, read through the variable table, turned into what `ratelimit` runs.

#include "server/rls/upstream_mode.h"

#include <absl/strings/ascii.h>
#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "common/status_macros.h"
#include "common/strings.h"
#include "server/config.h"

namespace floodgate::server::rls {

namespace {

absl::Status Refuse(const UpstreamEnv& env, std::string_view name, std::string_view why) {
  return absl::InvalidArgumentError(fmt::format("{}=\"{}\": {}", name, env.Text(name), why));
}

// HOST:PORT as upstream listens on it: net.Listen("tcp", host:port), any port 0-65535 (0: any
// free one).
absl::StatusOr<Listener> ListenerFrom(const UpstreamEnv& env, std::string_view host,
                                      std::string_view port) {
  const std::int64_t number = env.Int(port);
  if (number < 0 || number > 65535) return Refuse(env, port, "not a port (0 to 65535)");
  return Listener{env.String(host), static_cast<std::uint16_t>(number)};
}

// The store URL of upstream's main Redis (prefix "REDIS_") or its per-second one
// ("REDIS_PERSECOND_"): the same variables under either prefix, the TLS files shared (upstream's
// one RedisTlsConfig).
absl::StatusOr<std::string> StoreUrl(const UpstreamEnv& env, std::string_view prefix) {
  const auto var = [prefix](std::string_view name) { return fmt::format("{}{}", prefix, name); };
  UpstreamRedis redis;
  redis.url = env.String(var("URL"));
  redis.type = absl::AsciiStrToLower(env.String(var("TYPE")));
  if (redis.type != "single" && redis.type != "cluster" && redis.type != "sentinel") {
    return Refuse(env, var("TYPE"), "Unrecognized redis type (single, cluster or sentinel)");
  }
  // Go's net names, exactly: upstream dials with REDIS_SOCKET_TYPE as the network.
  const std::string& socket = env.String(var("SOCKET_TYPE"));
  if (socket == "tcp" || socket == "tcp4" || socket == "tcp6") {
    redis.socket_type = "tcp";
  } else if (socket == "unix") {
    redis.socket_type = "unix";
  } else if (redis.type == "single") {
    return Refuse(env, var("SOCKET_TYPE"),
                  "must be tcp, tcp4, tcp6 or unix (as Go's net names them)");
  }
  redis.auth = env.String(var("AUTH"));
  // As upstream, the sentinels' credentials only for a sentinel, the files only with TLS.
  if (redis.type == "sentinel") redis.sentinel_auth = env.String(var("SENTINEL_AUTH"));
  redis.tls = env.Bool(var("TLS"));
  if (redis.tls) {
    redis.ca = env.String("REDIS_TLS_CACERT");
    redis.cert = env.String("REDIS_TLS_CLIENT_CERT");
    redis.key = env.String("REDIS_TLS_CLIENT_KEY");
  }
  if (env.IsSet(var("POOL_SIZE"))) {
    if (env.Int(var("POOL_SIZE")) < 1) return Refuse(env, var("POOL_SIZE"), "must be at least 1");
    redis.pool_size = env.Int(var("POOL_SIZE"));
  }
  if (env.IsSet(var("TIMEOUT")) && env.Duration(var("TIMEOUT")).count() > 0) {
    redis.connect_timeout =
        std::chrono::duration_cast<std::chrono::microseconds>(env.Duration(var("TIMEOUT")));
  }
  if (env.Int(var("CLUSTER_PIPELINE_PARALLELISM")) < 0) {
    return Refuse(env, var("CLUSTER_PIPELINE_PARALLELISM"), "must not be negative");
  }
  const std::string on_empty = absl::AsciiStrToUpper(env.String(var("POOL_ON_EMPTY_BEHAVIOR")));
  if (on_empty == "CREATE" || on_empty == "ERROR") {
    return Refuse(env, var("POOL_ON_EMPTY_BEHAVIOR"),
                  "not supported (upstream refuses it too): calls wait for a connection, as WAIT");
  }
  return StoreUrlFromUpstreamRedis(redis);
}

// A Go duration as gRPC's milliseconds, a part of one rounded up (Go's timer would fire).
std::chrono::milliseconds Milliseconds(GoDuration duration) {
  return std::chrono::ceil<std::chrono::milliseconds>(duration);
}

absl::StatusOr<UpstreamGrpc> GrpcFrom(const UpstreamEnv& env) {
  UpstreamGrpc grpc;
  grpc.unix_socket = env.String("GRPC_UDS");
  for (std::string_view name : {"GRPC_MAX_CONNECTION_AGE", "GRPC_MAX_CONNECTION_AGE_GRACE"}) {
    // gRPC-go takes a negative age as one already past: every connection closed at once.
    if (env.Duration(name).count() < 0) return Refuse(env, name, "must not be negative");
  }
  grpc.max_connection_age = Milliseconds(env.Duration("GRPC_MAX_CONNECTION_AGE"));
  grpc.max_connection_age_grace = Milliseconds(env.Duration("GRPC_MAX_CONNECTION_AGE_GRACE"));
  if (!env.Bool("GRPC_SERVER_USE_TLS")) return grpc;
  GrpcTls tls{.cert_file = env.String("GRPC_SERVER_TLS_CERT"),
              .key_file = env.String("GRPC_SERVER_TLS_KEY"),
              .client_ca_file = env.String("GRPC_CLIENT_TLS_CACERT"),
              .client_san = env.String("GRPC_CLIENT_TLS_SAN")};
  if (tls.cert_file.empty() || tls.key_file.empty()) {
    return Refuse(env, "GRPC_SERVER_USE_TLS",
                  "needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY (upstream fails to load an "
                  "empty key pair)");
  }
  // Upstream's CertProvider watches one directory: "certFile and keyFile must be in the same
  // directory".
  if (std::filesystem::path(tls.cert_file).parent_path() !=
      std::filesystem::path(tls.key_file).parent_path()) {
    return Refuse(env, "GRPC_SERVER_TLS_KEY",
                  "GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY must be in the same directory");
  }
  grpc.tls = std::move(tls);
  return grpc;
}

// Upstream's counting settings (docs/envoy.md, "Shared counters").
absl::Status ReadCounting(const UpstreamEnv& env, RlsSettings& rls) {
  rls.cache_key_prefix = env.String("CACHE_KEY_PREFIX");
  rls.near_limit_ratio = static_cast<float>(env.Float("NEAR_LIMIT_RATIO"));
  rls.expiration_jitter_max_seconds = env.Int("EXPIRATION_JITTER_MAX_SECONDS");
  rls.stop_increment_when_over = env.Bool("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT");
  const std::int64_t bytes = env.Int("LOCAL_CACHE_SIZE_IN_BYTES");
  // Upstream's int: a negative size panics in freecache; past 1 GiB is no cache of keys.
  if (bytes < 0 || bytes > (std::int64_t{1} << 30)) {
    return Refuse(env, "LOCAL_CACHE_SIZE_IN_BYTES", "must be 0 (no cache) to 1073741824");
  }
  rls.local_cache_bytes = static_cast<std::size_t>(bytes);
  return absl::OkStatus();
}

// "host:port" as Go's net.Listen takes it: the host may be empty (every address) or
// bracketed (IPv6); the port a number 0-65535.
absl::StatusOr<Listener> GoListenAddress(const UpstreamEnv& env, std::string_view name) {
  const std::string& text = env.String(name);
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos) return Refuse(env, name, "missing port in address");
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const auto port = ParseGoInt(text.substr(colon + 1));
  if (!port.ok() || *port < 0 || *port > 65535 || text.substr(colon + 1).empty()) {
    return Refuse(env, name, "not a port (0 to 65535)");
  }
  return Listener{host.empty() ? "0.0.0.0" : host, static_cast<std::uint16_t>(*port)};
}

// USE_DOG_STATSD_MOGRIFIERS' names and their DOG_STATSD_MOGRIFIER_<NAME>_{PATTERN,NAME,TAGS}, as
// mogrifier_map.go reads them (envconfig upper-cases the names).
absl::StatusOr<std::vector<Mogrifier>> MogrifiersFrom(const UpstreamEnv& env) {
  std::vector<Mogrifier> out;
  auto list = ParseEnvValue(EnvType::kList, env.Text("USE_DOG_STATSD_MOGRIFIERS"));
  if (!list.ok()) return list.status();
  for (const std::string& key : std::get<std::vector<std::string>>(*list)) {
    const std::string prefix = absl::AsciiStrToUpper("DOG_STATSD_MOGRIFIER_" + key + "_");
    // mogrifier_map.go's errors, after the variables' names and values.
    const auto fail = [&](std::string_view variable, std::string_view why) {
      return absl::InvalidArgumentError(fmt::format(
          "USE_DOG_STATSD_MOGRIFIERS=\"{}\": {}=\"{}\": {} for mogrifier {}",
          env.Text("USE_DOG_STATSD_MOGRIFIERS"), variable, env.Text(variable), why, key));
    };
    Mogrifier mogrifier;
    mogrifier.pattern = env.Text(prefix + "PATTERN");
    mogrifier.name = env.Text(prefix + "NAME");
    if (mogrifier.pattern.empty()) return fail(prefix + "PATTERN", "no PATTERN specified");
    if (const re2::RE2 regex(mogrifier.pattern, re2::RE2::Quiet); !regex.ok()) {
      return fail(prefix + "PATTERN", "failed to compile pattern: " + regex.error());
    }
    if (mogrifier.name.empty()) return fail(prefix + "NAME", "no NAME specified");
    auto tags = ParseEnvValue(EnvType::kMap, env.Text(prefix + "TAGS"));
    if (!tags.ok()) return fail(prefix + "TAGS", MessageOf(tags.status()));
    for (auto& [tag, value] : std::get<std::vector<std::pair<std::string, std::string>>>(*tags)) {
      if (tag.empty() || value.empty())
        return fail(prefix + "TAGS", "a tag needs a key and a value");
      mogrifier.tags.emplace_back(std::move(tag), std::move(value));
    }
    // A Go map: one value per key (the last), iterated here in key order.
    std::stable_sort(mogrifier.tags.begin(), mogrifier.tags.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    out.push_back(std::move(mogrifier));
  }
  return out;
}

}  // namespace

absl::StatusOr<StatsSettings> StatsSettingsFrom(const UpstreamEnv& env) {
  StatsSettings stats;
  const bool statsd = env.Bool("USE_STATSD");
  const bool dog = env.Bool("USE_DOG_STATSD");
  const bool prometheus = env.Bool("USE_PROMETHEUS");
  if (env.Bool("DISABLE_STATS")) {
    stats.sink = StatsSinkKind::kNone;
  } else if (static_cast<int>(statsd) + static_cast<int>(dog) + static_cast<int>(prometheus) > 1) {
    // runner.go's Fatalf, naming the sink asked for besides USE_STATSD (true unless false).
    return Refuse(env, dog ? "USE_DOG_STATSD" : "USE_PROMETHEUS",
                  "unable to use more than one stats sink at the same time. Set one of "
                  "USE_DOG_STATSD, USE_STATSD, USE_PROMETHEUS (USE_STATSD is true unless set to "
                  "false)");
  } else if (dog) {
    stats.sink = StatsSinkKind::kDogStatsd;
  } else if (statsd) {
    stats.sink = StatsSinkKind::kStatsd;
  } else if (prometheus) {
    stats.sink = StatsSinkKind::kPrometheus;
  }
  stats.host = env.String("STATSD_HOST");
  const std::int64_t port = env.Int("STATSD_PORT");
  if (port < 0 || port > 65535) return Refuse(env, "STATSD_PORT", "not a port (0 to 65535)");
  stats.port = static_cast<std::uint16_t>(port);
  // gostats reads STATSD_PROTOCOL itself: empty is its default, tcp; any other network name
  // than these upstream dials for ever without sending a stat.
  const std::string& protocol = env.String("STATSD_PROTOCOL");
  if (protocol.empty() || protocol == "tcp" || protocol == "tcp4" || protocol == "tcp6") {
    stats.transport = StatsTransport::kTcp;
  } else if (protocol == "udp" || protocol == "udp4" || protocol == "udp6") {
    stats.transport = StatsTransport::kUdp;
  } else if (stats.sink == StatsSinkKind::kStatsd) {
    return Refuse(env, "STATSD_PROTOCOL", "must be tcp, tcp4, tcp6, udp, udp4 or udp6");
  }
  stats.tags = env.Map("EXTRA_TAGS");
  stats.flush_interval = env.Duration("STATS_FLUSH_INTERVAL");
  if (stats.flush_interval.count() <= 0) {
    return Refuse(env, "STATS_FLUSH_INTERVAL", "non-positive interval for NewTicker");
  }
  if (stats.sink == StatsSinkKind::kPrometheus) {
    Listener listener;
    FG_ASSIGN(listener, GoListenAddress(env, "PROMETHEUS_ADDR"));
    stats.prometheus_host = listener.host;
    stats.prometheus_port = listener.port;
    stats.prometheus_path = env.String("PROMETHEUS_PATH");
    // Go's mux: an empty pattern panics; the sink takes "" as its default.
    if (stats.prometheus_path.empty()) stats.prometheus_path = "/metrics";
    if (!stats.prometheus_path.starts_with('/')) {
      return Refuse(env, "PROMETHEUS_PATH", "a path starts with '/'");
    }
    stats.response_time_as_ms = env.Bool("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS");
  }
  if (stats.sink == StatsSinkKind::kDogStatsd) {
    FG_ASSIGN(stats.mogrifiers, MogrifiersFrom(env));
    // datadog-go: these become global tags, in this order.
    for (const auto& [name, tag] :
         std::initializer_list<std::pair<std::string_view, std::string_view>>{
             {"DD_ENTITY_ID", "dd.internal.entity_id"},
             {"DD_ENV", "env"},
             {"DD_SERVICE", "service"},
             {"DD_VERSION", "version"}}) {
      if (const std::string value = env.Text(name); !value.empty()) {
        stats.dogstatsd_tags.push_back(fmt::format("{}:{}", tag, value));
      }
    }
  }
  return stats;
}

std::chrono::nanoseconds GoBackoff::ForAttempt(int attempt, double random) const {
  using std::chrono::nanoseconds;
  const nanoseconds low = min.count() > 0 ? min : std::chrono::milliseconds(100);
  const nanoseconds high = max.count() > 0 ? max : std::chrono::seconds(10);
  if (low >= high) return high;
  const double low_ns = static_cast<double>(low.count());
  // Past 62 attempts the wait is long past any Go duration at a factor of 2 already; capped so
  // the product stays finite (2^1024 was infinite, and 0 jitter times that NaN).
  double wait = low_ns * std::pow(factor > 0 ? factor : 2.0, std::min(attempt, 62));
  if (!std::isfinite(wait)) return high;  // a factor so large that any jitter of it is past max
  if (jitter) wait = random * (wait - low_ns) + low_ns;
  if (wait >= static_cast<double>(high.count())) return high;
  const nanoseconds result(static_cast<std::int64_t>(wait));
  return result < low ? low : result;
}

std::chrono::nanoseconds StartupBackoff::Wait(int attempt, double random) const {
  return GoBackoff{initial, max, 2.0, true}.ForAttempt(attempt, random);
}

absl::StatusOr<LogLevel> ParseLogLevel(std::string_view text) {
  std::string level(text);
  absl::AsciiStrToLower(&level);
  if (level == "panic" || level == "fatal") return LogLevel::kFatal;
  if (level == "error") return LogLevel::kError;
  if (level == "warn" || level == "warning") return LogLevel::kWarn;
  if (level == "info") return LogLevel::kInfo;
  if (level == "debug") return LogLevel::kDebug;
  if (level == "trace") return LogLevel::kTrace;
  return absl::InvalidArgumentError(
      fmt::format("not a valid logrus Level: \"{}\" (panic, fatal, error, warn, info, debug, "
                  "trace)",
                  text));
}

absl::StatusOr<XdsSettings> XdsSettingsFrom(const UpstreamEnv& env) {
  XdsSettings xds;
  xds.server_url = env.String("CONFIG_GRPC_XDS_SERVER_URL");
  if (xds.server_url.empty()) return Refuse(env, "CONFIG_GRPC_XDS_SERVER_URL", "no server to dial");
  xds.node_id = env.String("CONFIG_GRPC_XDS_NODE_ID");
  xds.node_metadata = env.String("CONFIG_GRPC_XDS_NODE_METADATA");
  xds.headers = env.Map("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS");
  xds.use_tls = env.Bool("CONFIG_GRPC_XDS_SERVER_USE_TLS");
  xds.client_cert_file = env.String("CONFIG_GRPC_XDS_CLIENT_TLS_CERT");
  xds.client_key_file = env.String("CONFIG_GRPC_XDS_CLIENT_TLS_KEY");
  xds.server_ca_file = env.String("CONFIG_GRPC_XDS_SERVER_TLS_CACERT");
  xds.server_san = env.String("CONFIG_GRPC_XDS_SERVER_TLS_SAN");
  xds.backoff.min = env.Duration("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL");
  xds.backoff.max = env.Duration("XDS_CLIENT_BACKOFF_MAX_INTERVAL");
  xds.backoff.factor = env.Float("XDS_CLIENT_BACKOFF_RANDOM_FACTOR");
  xds.backoff.jitter = env.Bool("XDS_CLIENT_BACKOFF_JITTER");
  const std::int64_t max_bytes = env.Int("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES");
  // Go's int: gRPC takes a 32-bit size here.
  if (max_bytes < 0 || max_bytes > std::numeric_limits<int>::max()) {
    return Refuse(env, "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
                  fmt::format("a size from 0 (gRPC's default) to {} bytes",
                              std::numeric_limits<int>::max()));
  }
  xds.max_receive_bytes = static_cast<int>(max_bytes);
  xds.domains =
      env.Bool("MERGE_DOMAIN_CONFIG") ? DomainFiles::kMerged : DomainFiles::kOneFileEach;
  return xds;
}

absl::StatusOr<UpstreamMode> UpstreamModeFrom(const UpstreamEnv& env) {
  UpstreamMode mode;
  FG_ASSIGN(mode.http, ListenerFrom(env, "HOST", "PORT"));
  FG_ASSIGN(mode.grpc, ListenerFrom(env, "GRPC_HOST", "GRPC_PORT"));
  FG_ASSIGN(mode.debug, ListenerFrom(env, "DEBUG_HOST", "DEBUG_PORT"));
  FG_ASSIGN(mode.grpc_serving, GrpcFrom(env));

  const std::string& config_type = env.String("CONFIG_TYPE");
  if (config_type == "GRPC_XDS_SOTW") {
    mode.config_source = ConfigSource::kXds;
    FG_ASSIGN(mode.xds, XdsSettingsFrom(env));
  } else if (config_type != "FILE") {
    return Refuse(env, "CONFIG_TYPE", "Invalid setting for ConfigType (FILE or GRPC_XDS_SOTW)");
  }
  // With files there is nothing to wait for: they are loaded before the ports open.
  mode.force_start_without_config = mode.config_source == ConfigSource::kXds &&
                                    env.Bool("FORCE_START_WITHOUT_INITIAL_CONFIG");
  const std::string backend = env.String("BACKEND_TYPE");
  if (backend == "memcache") {
    return Refuse(env, "BACKEND_TYPE",
                  "not supported: floodgate has no memcached store (use redis, the default)");
  }
  if (backend != "redis" && !backend.empty()) {
    return Refuse(env, "BACKEND_TYPE", "Invalid setting for BackendType (redis or memcache)");
  }
  auto url = StoreUrl(env, "REDIS_");
  if (!url.ok()) return url.status();
  mode.store_url = *std::move(url);
  if (env.Bool("REDIS_PERSECOND")) {
    auto per_second = StoreUrl(env, "REDIS_PERSECOND_");
    if (!per_second.ok()) return per_second.status();
    mode.per_second_store_url = *std::move(per_second);
  }

  auto level = ParseLogLevel(env.String("LOG_LEVEL"));
  if (!level.ok()) return Refuse(env, "LOG_LEVEL", MessageOf(level.status()));
  mode.log_level = *level;
  mode.log_format = absl::AsciiStrToLower(env.String("LOG_FORMAT")) == "json" ? LogFormat::kJson
                                                                              : LogFormat::kText;

  RlsSettings& rls = mode.rls;
  rls.runtime_root = env.String("RUNTIME_ROOT");
  rls.runtime_subdirectory = env.String("RUNTIME_SUBDIRECTORY");
  rls.ignore_dotfiles = env.Bool("RUNTIME_IGNOREDOTFILES");
  rls.global_shadow = env.Bool("SHADOW_MODE");
  rls.response_headers = env.Bool("LIMIT_RESPONSE_HEADERS_ENABLED");
  rls.limit_header = env.String("LIMIT_LIMIT_HEADER");
  rls.remaining_header = env.String("LIMIT_REMAINING_HEADER");
  rls.reset_header = env.String("LIMIT_RESET_HEADER");
  for (std::string_view name :
       {"LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER"}) {
    if (env.String(name).empty()) return Refuse(env, name, "a header needs a name");
  }
  rls.global_quota = env.Bool("QUOTA_MODE");
  rls.dynamic_metadata = env.Bool("RESPONSE_DYNAMIC_METADATA");
  rls.merge_domains = env.Bool("MERGE_DOMAIN_CONFIG");
  // As upstream: a Redis failure is an error answer, and Envoy's failure_mode_deny decides.
  rls.unavailable_on_store_error = true;
  if (absl::Status status = ReadCounting(env, rls); !status.ok()) return status;

  mode.config_health = env.Bool("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED")
                           ? ConfigHealth::kNeedsADomain
                           : ConfigHealth::kIgnored;
  mode.redis_health = env.Bool("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION")
                          ? RedisHealth::kNeedsAConnection
                          : RedisHealth::kIgnored;
  mode.redis_startup.initial = env.Duration("REDIS_STARTUP_INITIAL_INTERVAL");
  mode.redis_startup.max = env.Duration("REDIS_STARTUP_MAX_INTERVAL");
  mode.redis_startup.max_elapsed = env.Duration("REDIS_STARTUP_MAX_ELAPSED_TIME");
  FG_ASSIGN(mode.stats, StatsSettingsFrom(env));
  return mode;
}

}  // namespace floodgate::server::rls

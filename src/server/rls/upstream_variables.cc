// The table of envoyproxy/ratelimit's environment variables: upstream's default, floodgate's take.
//
// Read from upstream's src/settings/settings.go (and the libraries it reads the environment
// through: gostats, datadog-go, OpenTelemetry) at commit f2fb15770f7f. One block per area, each
// row with a test (tests/upstream_settings_test.cc holds a sample value for every row).

#include <array>

#include "server/rls/upstream_settings.h"

namespace floodgate::server::rls {

namespace {

using enum EnvType;
using enum Support;

// The service: listeners, logging, config files, answers, health, backend.
constexpr std::array kServiceVariables = std::to_array<UpstreamVariable>({
    {"HOST", kString, "0.0.0.0", kSame,
     "the HTTP listener: `/healthcheck`, `/json` (and floodgate's `/metrics`, `/healthz`, "
     "`/readyz`; its `/v1/*` refuse an inline policy with 403, as there are no rules)"},
    {"PORT", kInt, "8080", kSame, ""},
    {"DEBUG_HOST", kString, "0.0.0.0", kMapped,
     "the debug listener: `/`, `/rlconfig`, `/stats`; no `/debug/pprof/` (Go's profiler)"},
    {"DEBUG_PORT", kInt, "6070", kMapped, "as `DEBUG_HOST`"},
    {"GRPC_HOST", kString, "0.0.0.0", kSame, "the gRPC listener (RLS v3, gRPC health)"},
    {"GRPC_PORT", kInt, "8081", kSame, ""},
    {"LOG_LEVEL", kString, "WARN", kMapped,
     "logrus' levels (any case) onto spdlog's: `panic`, `fatal` → critical, `error`, "
     "`warn`/`warning`, `info`, `debug`, `trace`; another value stops the start, as upstream"},
    {"LOG_FORMAT", kString, "text", kMapped,
     "`json` (any case): a JSON object a line with upstream's `@timestamp` (RFC 3339, ns), "
     "`@message`, `level`; anything else: logrus' text lines `time=\"...\" level=... msg=\"...\"`"},
    {"CONFIG_TYPE", kString, "FILE", kSame,
     "`FILE` (the runtime directory) or `GRPC_XDS_SOTW` (an xDS server, `CONFIG_GRPC_XDS_*`); "
     "another value stops the start, as upstream"},
    {"FORCE_START_WITHOUT_INITIAL_CONFIG", kBool, "false", kSame,
     "with `GRPC_XDS_SOTW`: the ports open before the first response (requests answered "
     "`no rate limit configuration loaded` until one); with `FILE` the files are loaded before "
     "the ports open either way"},
    {"RUNTIME_ROOT", kString, "/srv/runtime_data/current", kSame, ""},
    {"RUNTIME_SUBDIRECTORY", kString, "", kMapped,
     "the files are every file under `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/`; left empty, "
     "`RUNTIME_ROOT/config/` (upstream, watching the root, then reads none)"},
    {"RUNTIME_APPDIRECTORY", kString, "config", kRefused,
     "floodgate reads the directory `config` only", "config"},
    {"RUNTIME_IGNOREDOTFILES", kBool, "false", kSame, ""},
    {"RUNTIME_WATCH_ROOT", kBool, "true", kMapped,
     "either way every file under the config directory is polled each second and any change "
     "reloads (upstream: the root symlink's swap, or events in the directory)"},
    {"SHADOW_MODE", kBool, "false", kSame, ""},
    {"LIMIT_RESPONSE_HEADERS_ENABLED", kBool, "false", kSame, ""},
    {"LIMIT_LIMIT_HEADER", kString, "RateLimit-Limit", kSame, "an empty name stops the start"},
    {"LIMIT_REMAINING_HEADER", kString, "RateLimit-Remaining", kSame,
     "an empty name stops the start"},
    {"LIMIT_RESET_HEADER", kString, "RateLimit-Reset", kSame, "an empty name stops the start"},
    {"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", kBool, "false", kSame,
     "`/healthcheck` answers 500 while the loaded config has no domain"},
    {"BACKEND_TYPE", kString, "redis", kSame,
     "`redis` (or empty); `memcache` is refused: floodgate has no memcached store; another "
     "value stops the start, as upstream"},
});

// Redis: the store URL they describe (docs/envoy.md, "The store").
constexpr std::array kRedisVariables = std::to_array<UpstreamVariable>({
    {"REDIS_SOCKET_TYPE", kString, "unix", kMapped,
     "`tcp` (`tcp4`, `tcp6`) or `unix`, exactly (as Go's net names them): `redis://` or "
     "`redis+unix://`; a cluster or sentinel is dialled over TCP whatever it says, as upstream"},
    {"REDIS_TYPE", kString, "SINGLE", kMapped,
     "`single`, `cluster`, `sentinel` (any case): `redis://`, `redis-cluster://`, "
     "`redis-sentinel://`; another value stops the start, as upstream"},
    {"REDIS_URL", kString, "/var/run/nutcracker/ratelimit.sock", kMapped,
     "`host:port`, a socket path, `host:port,...` seeds (cluster), `MASTER,host:port,...` "
     "(sentinel); a URL with a scheme (`redis://user:pass@host:port/db`) is taken as "
     "floodgate's store URL"},
    {"REDIS_POOL_SIZE", kInt, "10", kMapped,
     "when set, `connections=` (1 to 64; each connection pipelines, so floodgate needs fewer: "
     "2 by default)"},
    {"REDIS_AUTH", kString, "", kMapped, "the URL's password, or `user:password`"},
    {"REDIS_TLS", kBool, "false", kMapped, "`rediss://` (`tls=1` on a cluster)"},
    {"REDIS_TLS_CLIENT_CERT", kString, "", kMapped, "`cert=`, with `REDIS_TLS=true`"},
    {"REDIS_TLS_CLIENT_KEY", kString, "", kMapped, "`key=`, with `REDIS_TLS=true`"},
    {"REDIS_TLS_CACERT", kString, "", kMapped,
     "`ca=`, trusted alone (upstream adds it to the system's roots), with `REDIS_TLS=true`"},
    {"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", kBool, "false", kRefused,
     "floodgate always checks the server's name: give the server's CA (`REDIS_TLS_CACERT`) "
     "instead",
     "false"},
    {"REDIS_PIPELINE_WINDOW", kDuration, "0", kMapped,
     "floodgate's connections always pipeline (auto-pipelining, batched scripts): nothing to "
     "tune"},
    {"REDIS_PIPELINE_LIMIT", kInt, "0", kIgnored, "deprecated upstream, without effect there"},
    {"REDIS_CLUSTER_PIPELINE_PARALLELISM", kInt, "1", kMapped,
     "floodgate sends to every node at once, always; a negative value stops the start, as "
     "upstream"},
    {"REDIS_SENTINEL_AUTH", kString, "", kMapped,
     "`sentinel_user=`, `sentinel_password=` of `redis-sentinel://`"},
    {"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", kBool, "false", kMapped,
     "`/healthcheck` answers 500 while the store has no ready connection to Redis"},
    {"REDIS_TIMEOUT", kDuration, "10s", kMapped,
     "when set, `connect_timeout=` (upstream's is the dial timeout too); a call waits at most "
     "the store's `timeout`, 50 ms"},
    {"REDIS_POOL_ON_EMPTY_BEHAVIOR", kString, "WAIT", kMapped,
     "calls queue on floodgate's connections, as `WAIT`; `CREATE` and `ERROR` stop the start, "
     "as upstream"},
    {"REDIS_STARTUP_INITIAL_INTERVAL", kDuration, "1s", kSame,
     "the ports open once Redis answers PING, retried from this wait, doubling, jittered"},
    {"REDIS_STARTUP_MAX_INTERVAL", kDuration, "30s", kSame, "the longest wait between tries"},
    {"REDIS_STARTUP_MAX_ELAPSED_TIME", kDuration, "0", kSame,
     "past this the start fails; `0`: try for ever"},
});

// Counting on Redis as upstream counts (docs/envoy.md, "Shared counters"): rules without
// floodgate's extensions keep upstream's keys, counts and TTLs.
constexpr std::string_view kPerSecondAsMain =
    "as its `REDIS_` twin, for the per-second store (`REDIS_PERSECOND=true`)";
constexpr std::array kCounterVariables = std::to_array<UpstreamVariable>({
    {"EXPIRATION_JITTER_MAX_SECONDS", kInt, "300", kSame,
     "a counter's TTL is its unit's seconds plus a random 0 to this less one, drawn per count"},
    {"LOCAL_CACHE_SIZE_IN_BYTES", kInt, "0", kMapped,
     "a key found over its limit is answered OVER_LIMIT without Redis until its unit has "
     "passed (`over_limit_with_local_cache`); the cache holds at most this many bytes (a key's "
     "length plus 48 each) instead of freecache's segments; 0 to 1 GiB"},
    {"NEAR_LIMIT_RATIO", kFloat32, "0.8", kSame,
     "hits past floor(limit × ratio) count as `near_limit`"},
    {"CACHE_KEY_PREFIX", kString, "", kSame, "starts every counter key"},
    {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", kBool, "false", kSame,
     "a request's counts are read first; when one would go over, only the keys that would are "
     "incremented (and none after a local-cache hit)"},
    {"REDIS_PERSECOND", kBool, "false", kSame,
     "`ratelimit`: SECOND limits count on a second store (`REDIS_PERSECOND_*`); `floodgate "
     "serve` refuses it (one store: `--store`)"},
    {"REDIS_PERSECOND_SOCKET_TYPE", kString, "unix", kMapped, kPerSecondAsMain},
    {"REDIS_PERSECOND_TYPE", kString, "SINGLE", kMapped, kPerSecondAsMain},
    {"REDIS_PERSECOND_URL", kString, "/var/run/nutcracker/ratelimitpersecond.sock", kMapped,
     kPerSecondAsMain},
    {"REDIS_PERSECOND_POOL_SIZE", kInt, "10", kMapped, kPerSecondAsMain},
    {"REDIS_PERSECOND_AUTH", kString, "", kMapped, kPerSecondAsMain},
    {"REDIS_PERSECOND_TLS", kBool, "false", kMapped,
     "as `REDIS_TLS`, with the same `REDIS_TLS_*` files (upstream's one TLS config)"},
    {"REDIS_PERSECOND_SENTINEL_AUTH", kString, "", kMapped, kPerSecondAsMain},
    {"REDIS_PERSECOND_PIPELINE_WINDOW", kDuration, "0", kMapped, kPerSecondAsMain},
    {"REDIS_PERSECOND_PIPELINE_LIMIT", kInt, "0", kIgnored,
     "deprecated upstream, without effect there"},
    {"REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", kInt, "1", kMapped, kPerSecondAsMain},
    {"REDIS_PERSECOND_TIMEOUT", kDuration, "10s", kMapped, kPerSecondAsMain},
    {"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", kString, "WAIT", kMapped, kPerSecondAsMain},
});

// Upstream's stats (docs/envoy.md, "Stats"): gostats v0.4.14's store and sinks, datadog-go
// v5.5.0, statsd_exporter v0.26.1's mapping, as runner.go chooses among them.
constexpr std::string_view kOnlyDogStatsd = "read only with `USE_DOG_STATSD=true`, as upstream";
constexpr std::array kStatsVariables = std::to_array<UpstreamVariable>({
    {"USE_STATSD", kBool, "true", kSame,
     "statsd lines (counters of type `c`, timers `ms`) to `STATSD_HOST:STATSD_PORT` each flush; "
     "false and no other sink: gostats' logging sink, JSON lines on stderr, as upstream"},
    {"STATSD_HOST", kString, "localhost", kSame,
     "resolved at each connection, as Go dials; statsd and DogStatsD"},
    {"STATSD_PORT", kInt, "8125", kSame, "statsd and DogStatsD"},
    {"STATSD_PROTOCOL", kString, "tcp", kMapped,
     "`tcp` (also when empty, as gostats), `tcp4`, `tcp6`: one connection, redialled after a "
     "failure; `udp`, `udp4`, `udp6`: datagrams of at most 1432 bytes of whole lines; another "
     "value stops the start (upstream would dial it for ever and send nothing)"},
    {"GOSTATS_FLUSH_INTERVAL_SECONDS", kInt, "5", kIgnored,
     "gostats' default store only; upstream's flushes follow `STATS_FLUSH_INTERVAL`"},
    {"GOSTATS_LOGGING_SINK_DISABLED", kBool, "false", kIgnored,
     "gostats' default store only; upstream makes its logging sink itself"},
    {"EXTRA_TAGS", kMap, "", kSame,
     "joined to every name as gostats serializes tags, `.__key=value` sorted by key (dots, colons "
     "and pipes of values as '_'); DogStatsD sends them as its `#key:value` tags"},
    {"STATS_FLUSH_INTERVAL", kDuration, "10s", kSame,
     "counters that moved are sent as deltas each interval; response times too (upstream: "
     "within a second); not positive stops the start (Go's NewTicker panics)"},
    {"DISABLE_STATS", kBool, "false", kSame,
     "no upstream stats are sent, whatever else is set (floodgate's own `/metrics` stays)"},
    {"USE_PROMETHEUS", kBool, "false", kMapped,
     "upstream's default statsd_exporter mapping, in code, served on `PROMETHEUS_ADDR` + "
     "`PROMETHEUS_PATH`; no `go_*`, `process_*`, `statsd_exporter_*` families; needs "
     "`USE_STATSD=false`, as upstream"},
    {"PROMETHEUS_ADDR", kString, ":9090", kSame,
     "an empty host listens on every address; a malformed address stops the start (upstream "
     "runs without the port)"},
    {"PROMETHEUS_PATH", kString, "/metrics", kSame, "other paths answer 404"},
    {"PROMETHEUS_MAPPER_YAML", kString, "", kRefused,
     "only upstream's default mapping is built in: a mapper file is not read", ""},
    {"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", kBool, "false", kSame,
     "`ratelimit_service_response_time_seconds` observed in milliseconds (the mapping's scale "
     "removed)"},
    {"USE_DOG_STATSD", kBool, "false", kSame,
     "DogStatsD lines over UDP to `STATSD_HOST:STATSD_PORT`, with `#` tags; no client telemetry "
     "(`datadog.dogstatsd.client.*`), no container id; needs `USE_STATSD=false`, as upstream"},
    {"USE_DOG_STATSD_MOGRIFIERS", kList, "", kSame,
     "each name's `DOG_STATSD_MOGRIFIER_<NAME>_PATTERN` (RE2, as Go's regexp), `_NAME`, `_TAGS` "
     "(`$N` the N-th match); the first that matches renames; a missing pattern or name stops "
     "the start"},
    {"DOG_STATSD_MOGRIFIER_*", kString, "", kSame, kOnlyDogStatsd},
    {"DD_*", kString, "", kMapped,
     "with `USE_DOG_STATSD`: `DD_ENTITY_ID`, `DD_ENV`, `DD_SERVICE`, `DD_VERSION` are global "
     "tags (`dd.internal.entity_id:`, `env:`, `service:`, `version:`), as datadog-go; the "
     "others have no effect (floodgate sends no container id)"},
});

// gRPC serving and the config keys' switches (grpc_tls.h, config.cc).
constexpr std::array kGrpcVariables = std::to_array<UpstreamVariable>({
    {"GRPC_UDS", kString, "", kSame,
     "set: gRPC listens on this unix socket instead of `GRPC_HOST:GRPC_PORT` (a stale socket "
     "file there is replaced)"},
    {"GRPC_MAX_CONNECTION_AGE", kDuration, "24h", kSame,
     "a connection this old is sent GOAWAY (±10% jitter, as Go's); `0`: never; a negative "
     "age stops the start"},
    {"GRPC_MAX_CONNECTION_AGE_GRACE", kDuration, "1h", kSame,
     "the calls of a connection past its age get this long, then it is closed; `0`: no bound"},
    {"GRPC_SERVER_USE_TLS", kBool, "false", kSame,
     "gRPC over TLS with `GRPC_SERVER_TLS_CERT` and `_KEY` (both needed, in one directory); a "
     "file that does not load stops the start"},
    {"GRPC_SERVER_TLS_CERT", kString, "", kSame,
     "the server's PEM certificate chain, read again each second: a renewed one serves new "
     "connections (a bad one keeps the last; upstream reloads on the directory's events); "
     "with `GRPC_SERVER_USE_TLS=true`"},
    {"GRPC_SERVER_TLS_KEY", kString, "", kSame, "its PEM key, read again as the certificate"},
    {"GRPC_CLIENT_TLS_CACERT", kString, "", kMapped,
     "set: every client must present a certificate this CA signed, for client "
     "authentication (mTLS); trusted alone (upstream adds the system's roots) and read again "
     "as the certificate; with `GRPC_SERVER_USE_TLS=true`"},
    {"GRPC_CLIENT_TLS_SAN", kString, "", kSame,
     "set: the client certificate must name it, as Go's `VerifyHostname` matches (a DNS SAN, "
     "`*.` wildcards, or an IP SAN); with `GRPC_CLIENT_TLS_CACERT`"},
    {"GRPC_SERVER_TLS_CA_CERT", kString, "", kIgnored,
     "not upstream's: Envoy Gateway sets it and upstream never reads it"},
    {"QUOTA_MODE", kBool, "false", kSame,
     "every descriptor in quota mode: the request is OVER_LIMIT only when all its "
     "descriptors are"},
    {"RESPONSE_DYNAMIC_METADATA", kBool, "false", kSame,
     "answers carry upstream's `dynamic_metadata`: the request, and the `metadata` of the "
     "limits that passed"},
    {"MERGE_DOMAIN_CONFIG", kBool, "false", kSame,
     "a domain may span files: their descriptors join (a composite key in two of them is "
     "still a duplicate)"},
});

// Config over xDS (xds_client.h): a SotW ADS stream of upstream's RateLimitConfig resources.
constexpr std::string_view kXdsTls = "read only with `CONFIG_GRPC_XDS_SERVER_USE_TLS=true`";
constexpr std::array kXdsVariables = std::to_array<UpstreamVariable>({
    {"CONFIG_GRPC_XDS_NODE_ID", kString, "default", kSame, "the `node.id` of every request"},
    {"CONFIG_GRPC_XDS_NODE_METADATA", kString, "", kSame,
     "`key=value,...`: the node's metadata as string values (entries without `=` skipped)"},
    {"CONFIG_GRPC_XDS_SERVER_URL", kString, "localhost:18000", kSame,
     "the gRPC target dialled; the stream starts once the connection is up (Go's `WithBlock`)"},
    {"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", kDuration, "3s", kIgnored,
     "without effect upstream too: it sets grpc_retry's backoff, which retries no "
     "bidirectional stream (and retries nothing at its default count of 0)"},
    {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", kMap, "", kSame,
     "`name:value,...` sent as the stream's metadata, names lower-cased"},
    {"CONFIG_GRPC_XDS_SERVER_USE_TLS", kBool, "false", kSame, ""},
    {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", kString, "", kSame,
     "with `CONFIG_GRPC_XDS_CLIENT_TLS_KEY`: the client certificate (both, or neither used)"},
    {"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", kString, "", kSame, kXdsTls},
    {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", kString, "", kSame,
     "the server's CA, added to the system's roots (`/etc/ssl/certs/ca-certificates.crt`) as "
     "upstream adds it to Go's system pool"},
    {"CONFIG_GRPC_XDS_SERVER_TLS_SAN", kString, "", kSame,
     "the name the server's certificate must carry (else the URL's host)"},
    {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", kDuration, "10s", kSame,
     "the wait after a broken stream: jpillora/backoff with these four as upstream passes "
     "them (its factor is `XDS_CLIENT_BACKOFF_RANDOM_FACTOR`, so at the defaults every wait "
     "is this one)"},
    {"XDS_CLIENT_BACKOFF_MAX_INTERVAL", kDuration, "60s", kSame, ""},
    {"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", kFloat64, "0.5", kSame,
     "the backoff's factor, as upstream uses it"},
    {"XDS_CLIENT_BACKOFF_JITTER", kBool, "true", kSame, ""},
    {"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", kInt, "", kSame,
     "the largest response (0: gRPC's 4 MiB); the config it makes is bounded as files are "
     "(docs/security.md)"},
});
// The memcached backend: never (floodgate's stores are memory and Redis).
constexpr std::string_view kOnlyMemcache =
    "read only with `BACKEND_TYPE=memcache` (refused: floodgate has no memcached store)";
constexpr std::array kMemcacheVariables = std::to_array<UpstreamVariable>({
    {"MEMCACHE_HOST_PORT", kList, "", kIgnored, kOnlyMemcache},
    {"MEMCACHE_MAX_IDLE_CONNS", kInt, "2", kIgnored, kOnlyMemcache},
    {"MEMCACHE_SRV", kString, "", kIgnored, kOnlyMemcache},
    {"MEMCACHE_SRV_REFRESH", kDuration, "0", kIgnored, kOnlyMemcache},
    {"MEMCACHE_TLS", kBool, "false", kIgnored, kOnlyMemcache},
    {"MEMCACHE_TLS_CLIENT_CERT", kString, "", kIgnored, kOnlyMemcache},
    {"MEMCACHE_TLS_CLIENT_KEY", kString, "", kIgnored, kOnlyMemcache},
    {"MEMCACHE_TLS_CACERT", kString, "", kIgnored, kOnlyMemcache},
    {"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", kBool, "false", kIgnored, kOnlyMemcache},
});

// OpenTelemetry trace export: not built.
constexpr std::string_view kOnlyTracing = "read only with `TRACING_ENABLED=true` (refused)";
constexpr std::array kTracingVariables = std::to_array<UpstreamVariable>({
    {"TRACING_ENABLED", kBool, "false", kRefused, "floodgate does not export OpenTelemetry traces",
     "false"},
    {"TRACING_SERVICE_NAME", kString, "RateLimit", kIgnored, kOnlyTracing},
    {"TRACING_SERVICE_NAMESPACE", kString, "", kIgnored, kOnlyTracing},
    {"TRACING_SERVICE_INSTANCE_ID", kString, "", kIgnored, kOnlyTracing},
    {"TRACING_EXPORTER_PROTOCOL", kString, "http", kIgnored, kOnlyTracing},
    {"TRACING_SAMPLING_RATE", kFloat64, "1", kIgnored, kOnlyTracing},
    {"OTEL_*", kString, "", kIgnored,
     "read by the trace exporter only (`TRACING_ENABLED`: refused)"},
});

template <std::size_t... N>
constexpr auto Join(const std::array<UpstreamVariable, N>&... blocks) {
  std::array<UpstreamVariable, (N + ...)> all{};
  std::size_t at = 0;
  ((std::copy(blocks.begin(), blocks.end(), all.begin() + static_cast<std::ptrdiff_t>(at)),
    at += N),
   ...);
  return all;
}

constexpr auto kAllVariables =
    Join(kServiceVariables, kRedisVariables, kCounterVariables, kStatsVariables, kGrpcVariables,
         kXdsVariables, kMemcacheVariables, kTracingVariables);

}  // namespace

std::span<const UpstreamVariable> UpstreamVariables() { return kAllVariables; }

}  // namespace floodgate::server::rls

// The store URL envoyproxy/ratelimit's Redis environment variables describe (config.h).

#include <absl/status/status.h>
#include <absl/strings/ascii.h>
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/strings.h"
#include "server/config.h"
#include "server/rls/upstream_settings.h"

namespace floodgate::server {

absl::StatusOr<std::string> StoreUrlFromUpstreamRedis(const UpstreamRedis& redis) {
  const std::string& url = redis.url;
  if (url.find("://") != std::string::npos) return url;  // floodgate's own store URL
  const auto refuse = [](std::string_view why) {
    return absl::InvalidArgumentError(fmt::format("upstream Redis settings: {}", why));
  };
  if (url.empty()) return refuse("REDIS_URL=\"\": no address");
  const std::string& type = redis.type;
  if (type != "single" && type != "cluster" && type != "sentinel") {
    return refuse(
        fmt::format("REDIS_TYPE must be SINGLE, CLUSTER or SENTINEL, got \"{}\"", redis.type));
  }
  // Upstream's default socket type is unix; an explicit tcp, or a host:port URL, is TCP.
  const std::string& socket_type = redis.socket_type;
  if (!socket_type.empty() && socket_type != "tcp" && socket_type != "unix") {
    return refuse(fmt::format("REDIS_SOCKET_TYPE must be tcp or unix, got \"{}\"", socket_type));
  }
  // Upstream dials a cluster's nodes, a sentinel and the primary it names over TCP whatever
  // REDIS_SOCKET_TYPE says (radix asks its pool for "tcp"), so only a single server takes a
  // socket path.
  const bool unix_socket =
      type == "single" && (socket_type == "unix" || (socket_type.empty() && url.starts_with('/')));
  if (type == "cluster" && url.starts_with('/')) {
    return refuse(fmt::format(
        "REDIS_URL \"{}\" is a unix socket; a cluster is reached over TCP (host:port,...)", url));
  }
  // Sentinel: "MASTER,host:port[,host:port...]", the master's name first.
  const std::size_t comma = url.find(',');
  if (type == "sentinel" && (comma == std::string::npos || comma == 0 || url.starts_with('/'))) {
    return refuse(
        fmt::format("REDIS_TYPE=sentinel takes REDIS_URL as the master's name, then the sentinels: "
                    "mymaster,host:port[,host:port...], got \"{}\"",
                    url));
  }
  if (unix_socket && !url.starts_with('/')) {
    return refuse(fmt::format(
        "REDIS_SOCKET_TYPE=unix takes REDIS_URL as the socket's absolute path, got \"{}\" (for "
        "host:port set REDIS_SOCKET_TYPE=tcp)",
        url));
  }
  if (type == "single" && url.find(',') != std::string::npos) {
    return refuse(fmt::format("REDIS_URL \"{}\" lists several hosts: set REDIS_TYPE=cluster", url));
  }
  const bool tls = redis.tls;
  if (unix_socket && tls) {
    return refuse("REDIS_TLS=true with a unix socket: Redis serves TLS on TCP only");
  }
  // REDIS_AUTH is a password, or user:password (cut at the first ':'); escaped for the URL.
  const auto user_password = [](const std::string& secret) -> std::pair<std::string, std::string> {
    const std::size_t colon = secret.find(':');
    if (colon == std::string::npos) return {"", secret};
    return {secret.substr(0, colon), secret.substr(colon + 1)};
  };
  std::string auth;
  if (!redis.auth.empty()) {
    const auto [user, password] = user_password(redis.auth);
    auth = redis.auth.find(':') == std::string::npos
               ? PercentEncode(password)
               : PercentEncode(user) + ":" + PercentEncode(password);
    auth += "@";
  }
  std::string out;
  if (unix_socket) {
    // The path's own '%', '?', '#' and spaces escaped; its '/' kept.
    std::string path;
    for (const char c : url) path += c == '/' ? std::string(1, c) : PercentEncode({&c, 1});
    out = "redis+unix://" + auth + path;
  } else if (type == "sentinel") {
    out = (tls ? "rediss-sentinel://" : "redis-sentinel://") + auth + url.substr(comma + 1) + "/" +
          PercentEncode(url.substr(0, comma));
  } else {
    out = type == "cluster" ? "redis-cluster://" : (tls ? "rediss://" : "redis://");
    out += auth + url;
  }
  std::vector<std::string> options;
  if (type == "cluster" && tls) options.emplace_back("tls=1");
  if (redis.pool_size.has_value()) {
    if (*redis.pool_size < 1) {
      return refuse(fmt::format("REDIS_POOL_SIZE must be >= 1, got {}", *redis.pool_size));
    }
    // Our connections pipeline (upstream's pool does not): 64 of them is our ceiling and
    // more than any pool of upstream's needs.
    options.push_back(fmt::format("connections={}", std::min<std::int64_t>(*redis.pool_size, 64)));
  }
  if (redis.connect_timeout.has_value() && redis.connect_timeout->count() > 0) {
    options.push_back(fmt::format("connect_timeout={}us", redis.connect_timeout->count()));
  }
  struct File {
    const char* variable;
    const char* option;
    const std::string* path;
  };
  for (const File& file : {File{"REDIS_TLS_CACERT", "ca", &redis.ca},
                           File{"REDIS_TLS_CLIENT_CERT", "cert", &redis.cert},
                           File{"REDIS_TLS_CLIENT_KEY", "key", &redis.key}}) {
    const char* name = file.variable;
    const std::string* path = file.path;
    if (path->empty()) continue;
    if (!tls) return refuse(fmt::format("{} needs REDIS_TLS=true", name));
    // Query values are taken as they are (no %-escapes): a path holding '&' cannot pass.
    if (path->find('&') != std::string::npos) {
      return refuse(fmt::format("{} must not hold '&'", name));
    }
    options.push_back(fmt::format("{}={}", file.option, *path));
  }
  if (!redis.sentinel_auth.empty()) {
    if (type != "sentinel") return refuse("REDIS_SENTINEL_AUTH needs REDIS_TYPE=sentinel");
    const auto [user, password] = user_password(redis.sentinel_auth);
    if (!user.empty()) options.push_back("sentinel_user=" + PercentEncode(user));
    options.push_back("sentinel_password=" + PercentEncode(password));
  }
  if (redis.skip_hostname_verification) {
    return refuse(
        "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION is not supported: give the server's CA "
        "(REDIS_TLS_CACERT) instead");
  }
  for (std::size_t i = 0; i < options.size(); ++i) out += (i == 0 ? "?" : "&") + options[i];
  return out;
}

absl::StatusOr<std::optional<std::string>> StoreUrlFromUpstreamRedisEnv(
    const std::function<const char*(const char*)>& env) {
  const auto get = [&](const char* name) -> std::string {
    const char* value = env(name);
    return value == nullptr ? "" : value;
  };
  // Booleans as upstream reads them (Go's strconv.ParseBool); another value stops the start.
  const auto flag = [&](const char* name, bool& into) -> absl::Status {
    const std::string value = get(name);
    if (value.empty()) return absl::OkStatus();
    auto parsed = rls::ParseGoBool(value);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(fmt::format("upstream Redis settings: {}=\"{}\": {}", name,
                                                    value, MessageOf(parsed.status())));
    }
    into = *parsed;
    return absl::OkStatus();
  };
  UpstreamRedis redis;
  redis.url = get("REDIS_URL");
  if (redis.url.empty()) return std::nullopt;
  redis.type = absl::AsciiStrToLower(get("REDIS_TYPE"));
  if (redis.type.empty()) redis.type = "single";
  redis.socket_type = absl::AsciiStrToLower(get("REDIS_SOCKET_TYPE"));
  redis.auth = get("REDIS_AUTH");
  if (absl::Status s = flag("REDIS_TLS", redis.tls); !s.ok()) return s;
  redis.ca = get("REDIS_TLS_CACERT");
  redis.cert = get("REDIS_TLS_CLIENT_CERT");
  redis.key = get("REDIS_TLS_CLIENT_KEY");
  if (absl::Status s =
          flag("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", redis.skip_hostname_verification);
      !s.ok()) {
    return s;
  }
  if (const std::string pool = get("REDIS_POOL_SIZE"); !pool.empty()) {
    int size = 0;
    if (!ParseDecimal(std::string_view(pool), size) || size < 1) {
      return absl::InvalidArgumentError(fmt::format(
          "upstream Redis settings: REDIS_POOL_SIZE must be a whole number >= 1, got \"{}\"",
          pool));
    }
    redis.pool_size = size;
  }
  auto url = StoreUrlFromUpstreamRedis(redis);
  if (!url.ok()) return url.status();
  return std::optional<std::string>(*std::move(url));
}

}  // namespace floodgate::server

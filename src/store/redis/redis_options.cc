// RedisStoreOptions from a store URL (docs/service.md, "Store URLs").
// redis://[user:password@]host:port[/db][?option=value&...], redis+unix:///path[?db=N&...],
// redis-sentinel://[user:password@]host:port[,host:port...]/MASTER[?db=N&...]
#include <absl/status/status.h>
#include <fmt/format.h>
#include <sys/un.h>

#include <charconv>
#include <tuple>

#include "common/strings.h"
#include "floodgate/redis_store.h"

namespace floodgate {

namespace {

absl::Status Bad(std::string_view url, std::string_view why) {
  return absl::InvalidArgumentError(fmt::format("invalid redis URL \"{}\": {}", url, why));
}

// %XX escapes, so passwords may hold '@', ':' or '/'.
std::optional<std::string> PercentDecode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    unsigned value = 0;
    if (i + 2 >= s.size()) return std::nullopt;
    const auto [end, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, value, 16);
    if (ec != std::errc() || end != s.data() + i + 3) return std::nullopt;
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

template <class Int>
bool ParseBounded(std::string_view text, Int min, Int max, Int& out) {
  return ParseDecimal(text, out) && out >= min && out <= max;
}

// host:port, [v6]:port or host (port `default_port`: 6379, a sentinel's 26379).
absl::StatusOr<RedisEndpoint> ParseEndpoint(std::string_view url, std::string_view text,
                                            std::uint16_t default_port = 6379) {
  std::string_view host = text;
  std::string_view port;
  if (text.starts_with('[')) {  // [IPv6]:port
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return Bad(url, "unclosed '[' in host");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return Bad(url, "expected ':' after ']'");
      port = text.substr(close + 2);
    }
  } else if (const std::size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) return Bad(url, "missing host");
  RedisEndpoint endpoint{std::string(host), default_port};
  if (!port.empty() && !ParseBounded<std::uint16_t>(port, 1, 65535, endpoint.port)) {
    return Bad(url, fmt::format("port must be 1-65535, got \"{}\"", port));
  }
  return endpoint;
}

// user:password, or a password alone (redis://secret@host, as redis-cli reads it).
absl::Status ParseUserinfo(std::string_view url, std::string_view userinfo,
                           RedisStoreOptions& options) {
  const std::size_t colon = userinfo.find(':');
  auto user = PercentDecode(userinfo.substr(0, colon));
  auto password = PercentDecode(colon == std::string_view::npos ? std::string_view()
                                                                : userinfo.substr(colon + 1));
  if (!user || !password) return Bad(url, "bad %-escape in user or password");
  if (colon == std::string_view::npos) {
    options.password = *user;
  } else {
    options.user = *user;
    options.password = *password;
  }
  return absl::OkStatus();
}

// [user:password@]host:port[,host:port...][/db] of redis://, rediss:// and redis-cluster://.
absl::Status ParseHosts(std::string_view url, std::string_view rest, RedisStoreOptions& options) {
  if (options.cluster && rest.starts_with('/')) {
    return Bad(url,
               "Redis Cluster is reached over TCP (its nodes announce host:port), not "
               "over a unix socket");
  }
  if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
    if (absl::Status s = ParseUserinfo(url, rest.substr(0, at), options); !s.ok()) return s;
    rest = rest.substr(at + 1);
  }
  if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && !ParseBounded(db, 0, 1'000'000, options.db)) {
      return Bad(url, fmt::format("database must be a number, got \"{}\"", db));
    }
    if (options.cluster && options.db != 0) {
      return Bad(url, "Redis Cluster has only database 0");
    }
    rest = rest.substr(0, slash);
  }
  if (!options.cluster && !options.sentinel) {
    auto endpoint = ParseEndpoint(url, rest);
    if (!endpoint.ok()) return endpoint.status();
    options.host = endpoint->host;
    options.port = endpoint->port;
    options.seeds = {*endpoint};
    return absl::OkStatus();
  }
  absl::Status seeds;
  ForEachItem(rest, ',', [&](std::string_view item) {
    auto endpoint = ParseEndpoint(url, item, options.sentinel ? 26379 : 6379);
    if (!endpoint.ok()) {
      if (seeds.ok()) seeds = endpoint.status();
      return;
    }
    options.seeds.push_back(*std::move(endpoint));
  });
  if (!seeds.ok()) return seeds;
  if (options.seeds.empty()) return Bad(url, "missing host");
  options.host = options.seeds.front().host;
  options.port = options.seeds.front().port;
  return absl::OkStatus();
}

// [user:password@]/absolute/path: the host is empty (a socket names no host), as in
// redis-py's and go-redis's unix:// URLs. The database is the db= option.
absl::Status ParseUnixSocket(std::string_view url, std::string_view rest,
                             RedisStoreOptions& options) {
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) {
    return Bad(url, "expected an absolute socket path: redis+unix:///path/to/redis.sock");
  }
  if (const std::string_view authority = rest.substr(0, slash); !authority.empty()) {
    if (!authority.ends_with('@')) {
      return Bad(url, fmt::format("a unix socket has no host, got \"{}\": write "
                                  "redis+unix:///path (three slashes) or "
                                  "redis+unix://user:password@/path ('/' in a password as %2F)",
                                  authority));
    }
    if (absl::Status s = ParseUserinfo(url, authority.substr(0, authority.size() - 1), options);
        !s.ok()) {
      return s;
    }
  }
  auto path = PercentDecode(rest.substr(slash));
  if (!path) return Bad(url, "bad %-escape in the socket path");
  if (*path == "/") return Bad(url, "missing socket path");
  // sockaddr_un holds the path and its NUL: a longer one cannot be dialled at all.
  if (constexpr std::size_t kMax = sizeof(sockaddr_un::sun_path) - 1; path->size() > kMax) {
    return Bad(url, fmt::format("the socket path is {} bytes, more than the {} a unix socket "
                                "address holds",
                                path->size(), kMax));
  }
  options.unix_socket = *std::move(path);
  return absl::OkStatus();
}

// [user:password@]host:port[,host:port...]/MASTER: the sentinels (port 26379 when left
// out), then the name they monitor the primary under. The credentials are the primary's;
// the sentinels' own are options. The database is the db= option.
absl::Status ParseSentinel(std::string_view url, std::string_view rest,
                           RedisStoreOptions& options) {
  const std::size_t slash =
      rest.find('/', rest.rfind('@') == std::string_view::npos ? 0 : rest.rfind('@'));
  auto master = PercentDecode(slash == std::string_view::npos ? "" : rest.substr(slash + 1));
  if (!master || master->empty() || master->find('/') != std::string::npos) {
    return Bad(url,
               "expected the master's name after the sentinels: "
               "redis-sentinel://host:port[,host:port...]/MASTER (the database is db=N)");
  }
  options.sentinel_master = *std::move(master);
  return ParseHosts(url, rest.substr(0, slash), options);
}

}  // namespace

absl::StatusOr<RedisStoreOptions> RedisStoreOptions::FromUrl(std::string_view url) {
  RedisStoreOptions options;
  std::string_view rest;
  bool unix_socket = false;
  for (const auto& [scheme, cluster, tls, over_socket, sentinel] :
       {std::tuple{"redis://", false, false, false, false},
        std::tuple{"rediss://", false, true, false, false},
        std::tuple{"redis-cluster://", true, false, false, false},
        std::tuple{"redis+unix://", false, false, true, false},
        std::tuple{"redis-sentinel://", false, false, false, true},
        std::tuple{"rediss-sentinel://", false, true, false, true}}) {
    if (url.starts_with(scheme)) {
      rest = url.substr(std::string_view(scheme).size());
      options.cluster = cluster;
      options.tls = tls;
      unix_socket = over_socket;
      options.sentinel = sentinel;
      break;
    }
  }
  if (rest.data() == nullptr) {
    if (url.starts_with("rediss+unix://")) {
      return Bad(url, "Redis serves TLS on TCP only: a unix socket is redis+unix://");
    }
    if (url.starts_with("redis+sentinel://")) {
      return Bad(url, "Redis Sentinel is redis-sentinel://host:port[,host:port...]/MASTER");
    }
    return Bad(url,
               "expected redis://host:port, rediss://host:port, redis+unix:///path/to/socket, "
               "redis-cluster://host:port[,host:port...] or "
               "redis-sentinel://host:port[,host:port...]/MASTER");
  }
  std::string_view query;
  if (const std::size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  const absl::Status where = unix_socket        ? ParseUnixSocket(url, rest, options)
                             : options.sentinel ? ParseSentinel(url, rest, options)
                                                : ParseHosts(url, rest, options);
  if (!where.ok()) return where;

  const absl::Status query_status =
      ForEachQueryOption(query, [&](std::string_view name, std::string_view value) {
        const auto duration = [&](std::chrono::microseconds& out) -> absl::Status {
          auto d = ParseDuration(value);
          if (!d.ok()) return Bad(url, fmt::format("{} {}", name, MessageOf(d.status())));
          out = *d;
          return absl::OkStatus();
        };
        const auto flag = [&](bool& out) -> absl::Status {
          if (value != "1" && value != "0") {
            return Bad(url, fmt::format("{} must be 1 or 0, got \"{}\"", name, value));
          }
          out = value == "1";
          return absl::OkStatus();
        };
        absl::Status status;
        if (name == "timeout") {
          status = duration(options.timeout);
          if (status.ok() && options.timeout.count() <= 0) status = Bad(url, "timeout must be > 0");
        } else if (name == "connect_timeout") {
          status = duration(options.connect_timeout);
        } else if (name == "denial_cache") {
          status = duration(options.denial_cache_min);
        } else if (name == "on_error") {
          if (value == "fail_open") {
            options.on_error = OnError::kFailOpen;
          } else if (value == "fail_closed") {
            options.on_error = OnError::kFailClosed;
          } else if (value == "local") {
            options.on_error = OnError::kLocal;
          } else {
            status = Bad(url, fmt::format("on_error must be fail_open, fail_closed or local, got "
                                          "\"{}\"",
                                          value));
          }
        } else if (name == "connections") {
          if (!ParseBounded(value, 1, 64, options.connections)) {
            status = Bad(url, fmt::format("connections must be 1-64, got \"{}\"", value));
          }
        } else if (name == "batch") {
          if (!ParseBounded(value, 1, 1024, options.max_batch)) {
            status = Bad(url, fmt::format("batch must be 1-1024, got \"{}\"", value));
          }
        } else if (name == "lazy_connect") {
          status = flag(options.lazy_connect);
        } else if (name == "prefix") {
          options.prefix = std::string(value);
        } else if (name == "tls") {
          status = flag(options.tls);
        } else if (name == "ca") {
          options.tls_ca = std::string(value);
        } else if (name == "cert") {
          options.tls_cert = std::string(value);
        } else if (name == "key") {
          options.tls_key = std::string(value);
        } else if (name == "sni") {
          options.tls_server_name = std::string(value);
        } else if (name == "wait_replicas") {
          if (!ParseBounded(value, 0, 16, options.wait_replicas)) {
            status = Bad(url, fmt::format("wait_replicas must be 0-16, got \"{}\"", value));
          }
        } else if ((name == "sentinel_user" || name == "sentinel_password") && options.sentinel) {
          auto decoded = PercentDecode(value);
          if (!decoded) return Bad(url, fmt::format("bad %-escape in {}", name));
          (name == "sentinel_user" ? options.sentinel_user : options.sentinel_password) =
              *std::move(decoded);
        } else if (name == "sentinel_user" || name == "sentinel_password") {
          status = Bad(url, fmt::format("{} is for redis-sentinel://", name));
        } else if (name == "db" && (unix_socket || options.sentinel)) {
          if (!ParseBounded(value, 0, 1'000'000, options.db)) {
            status = Bad(url, fmt::format("database must be a number, got \"{}\"", value));
          }
        } else if (name == "db") {
          status = Bad(url, options.cluster ? "Redis Cluster has only database 0"
                                            : "db= is for redis+unix:// and redis-sentinel://; "
                                              "here the database is the path: "
                                              "redis://host:port/N");
        } else {
          status = Bad(
              url, fmt::format(
                       "unknown option \"{}\" (known: timeout, connect_timeout, "
                       "on_error, connections, batch, prefix, denial_cache, lazy_connect, tls, ca, "
                       "cert, key, sni, wait_replicas{}{})",
                       name, unix_socket || options.sentinel ? ", db" : "",
                       options.sentinel ? ", sentinel_user, sentinel_password" : ""));
        }
        return status;
      });
  if (!query_status.ok()) return query_status;
  if (unix_socket && (options.tls || !options.tls_ca.empty() || !options.tls_cert.empty() ||
                      !options.tls_key.empty() || !options.tls_server_name.empty())) {
    return Bad(url,
               "Redis serves TLS on TCP only: tls, ca, cert, key and sni do not apply to "
               "a unix socket");
  }
  if (!options.tls && (!options.tls_ca.empty() || !options.tls_cert.empty() ||
                       !options.tls_key.empty() || !options.tls_server_name.empty())) {
    return Bad(url, "ca, cert, key and sni are TLS options: use rediss:// (or tls=1)");
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return Bad(url, "a client certificate needs both cert= and key=");
  }
  return options;
}

std::string RedisStoreOptions::Describe() const {
  std::string auth;
  if (!user.empty())
    auth = user + (password.empty() ? "" : ":***") + "@";
  else if (!password.empty())
    auth = "***@";
  std::string url;
  if (!unix_socket.empty()) {
    url = fmt::format("redis+unix://{}{}?db={}", auth, unix_socket, db);
  } else if (!cluster && !sentinel) {
    url = fmt::format("{}://{}{}/{}", tls ? "rediss" : "redis", auth, HostPort(host, port), db);
  } else {
    std::string hosts;
    for (const RedisEndpoint& seed : seeds) {
      if (!hosts.empty()) hosts += ',';
      hosts += HostPort(seed.host, seed.port);
    }
    url = sentinel ? fmt::format("{}://{}{}/{}?db={}", tls ? "rediss-sentinel" : "redis-sentinel",
                                 auth, hosts, sentinel_master, db)
                   : fmt::format("redis-cluster://{}{}{}", auth, hosts, tls ? "?tls=1" : "");
  }
  // Every option that changes what the store does, when it is not the default, as the URL
  // spells it: a log line or a metric label says how the store runs, wait_replicas above all
  // (issue 37). Secrets stay out (the passwords; a key file is named, not read).
  const RedisStoreOptions defaults;
  const auto duration = [](std::chrono::microseconds d) {
    return d.count() == 0 ? std::string("0s") : FormatDuration(d);  // not "0d"
  };
  const auto add = [&url](std::string_view name, std::string_view value) {
    url += fmt::format("{}{}={}", url.find('?') == std::string::npos ? '?' : '&', name, value);
  };
  if (timeout != defaults.timeout) add("timeout", duration(timeout));
  if (connect_timeout != defaults.connect_timeout) {
    add("connect_timeout", duration(connect_timeout));
  }
  if (on_error != defaults.on_error) {
    add("on_error", on_error == OnError::kFailOpen     ? "fail_open"
                    : on_error == OnError::kFailClosed ? "fail_closed"
                                                       : "local");
  }
  if (wait_replicas != defaults.wait_replicas) add("wait_replicas", std::to_string(wait_replicas));
  if (lazy_connect != defaults.lazy_connect) add("lazy_connect", lazy_connect ? "1" : "0");
  if (connections != defaults.connections) add("connections", std::to_string(connections));
  if (max_batch != defaults.max_batch) add("batch", std::to_string(max_batch));
  if (denial_cache_min != defaults.denial_cache_min) {
    add("denial_cache", duration(denial_cache_min));
  }
  if (prefix != defaults.prefix) add("prefix", prefix);
  if (!tls_ca.empty()) add("ca", tls_ca);
  if (!tls_cert.empty()) add("cert", tls_cert);
  if (!tls_key.empty()) add("key", tls_key);
  if (!tls_server_name.empty()) add("sni", tls_server_name);
  if (!sentinel_user.empty()) add("sentinel_user", sentinel_user);
  return url;
}

}  // namespace floodgate

// Upstream's stats from `ratelimit`, a process on a real redis-server: statsd over UDP and TCP
// to listeners in the test, DogStatsD, Prometheus scraped, the debug port's /stats, the logging
// sink and DISABLE_STATS.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "hang_guard.h"
#include "redis_server.h"
#include "rls_request.h"
#include "serve_process.h"
#include "upstream_process.h"

namespace floodgate::testing {
namespace {

namespace beast = boost::beast;
namespace pb = ::envoy::service::ratelimit::v3;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr milliseconds kStart = kHangGuard;

// 3 a day: the test's calls all fall in one window (a minute's end could split them).
constexpr const char* kThreeADay = R"(domain: rl
descriptors:
  - key: source_cluster
    value: proxy
    descriptors:
      - key: destination_cluster
        value: mock
        rate_limit:
          unit: day
          requests_per_unit: 3
)";
constexpr const char* kKey =
    "ratelimit.service.rate_limit.rl.source_cluster_proxy."
    "destination_cluster_mock";

// upstream_process.h's root with the rule above as its one config file.
struct StatsConfigRoot : ConfigRoot {
  StatsConfigRoot() { Write("config.yaml", kThreeADay); }
};

// A loopback socket the test reads statsd from: UDP datagrams, or one accepted TCP stream.
class StatsListener {
 public:
  explicit StatsListener(int type) : type_(type) {
    fd_ = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    socklen_t size = sizeof address;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
    if (type == SOCK_STREAM) ::listen(fd_, 4);
  }
  ~StatsListener() {
    if (peer_ >= 0) ::close(peer_);
    ::close(fd_);
  }
  int port() const { return port_; }

  // Reads until `done(text so far)` or kHangGuard; true when done.
  bool ReadUntil(const std::function<bool(const std::string&)>& done) {
    const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
    while (!done(text_)) {
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      if (!ReadOnce(static_cast<int>(left.count()))) continue;
    }
    return true;
  }
  // What has arrived without waiting (the sender has exited: its datagrams are all here).
  const std::string& Drain() {
    while (ReadOnce(0)) {
    }
    return text_;
  }
  const std::string& text() const { return text_; }
  int datagrams() const { return datagrams_; }

 private:
  bool ReadOnce(int wait_ms) {
    if (type_ == SOCK_STREAM && peer_ < 0) {
      pollfd accept_wait{.fd = fd_, .events = POLLIN, .revents = 0};
      if (::poll(&accept_wait, 1, wait_ms) != 1) return false;
      peer_ = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      return peer_ >= 0;
    }
    const int from = type_ == SOCK_STREAM ? peer_ : fd_;
    pollfd wait{.fd = from, .events = POLLIN, .revents = 0};
    if (::poll(&wait, 1, wait_ms) != 1) return false;
    char buffer[65'536];
    const ssize_t n = ::recv(from, buffer, sizeof buffer, 0);
    if (n <= 0) return false;
    if (type_ == SOCK_DGRAM) {
      ++datagrams_;
      EXPECT_LE(n, 1432) << "gostats' datagrams hold at most 1432 bytes";
      EXPECT_EQ(buffer[n - 1], '\n') << "whole lines";
    }
    text_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  int type_;
  int fd_ = -1;
  int peer_ = -1;
  int port_ = 0;
  std::string text_;
  int datagrams_ = 0;
};

// The sum of `name:<n>|<type>...` lines' values for one exact name.
std::uint64_t Sum(const std::string& text, const std::string& name, std::string_view type = "c") {
  std::uint64_t total = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with(name + ":")) continue;
    const std::string rest = line.substr(name.size() + 1);
    const std::size_t bar = rest.find('|');
    if (bar == std::string::npos || rest.substr(bar + 1, type.size()) != type) continue;
    total += static_cast<std::uint64_t>(std::stod(rest.substr(0, bar)));
  }
  return total;
}

// `ratelimit` on `redis` and `config`, on `ports`, with `extra` besides the base environment.
std::unique_ptr<ServeProcess> StartRatelimit(const RedisServer& redis,
                                             const StatsConfigRoot& config, const Ports& ports,
                                             const std::vector<std::string>& extra) {
  std::vector<std::string> env = {
      "REDIS_SOCKET_TYPE=tcp", fmt::format("REDIS_URL=127.0.0.1:{}", redis.port()),
      "RUNTIME_ROOT=" + config.root(), "RUNTIME_SUBDIRECTORY=ratelimit", "HOST=127.0.0.1",
      "GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1", fmt::format("PORT={}", ports.http),
      fmt::format("GRPC_PORT={}", ports.grpc), fmt::format("DEBUG_PORT={}", ports.debug),
      // Flushes often, so that the test's events come soon; what is waited for is the stats
      // themselves.
      "STATS_FLUSH_INTERVAL=100ms"};
  env.insert(env.end(), extra.begin(), extra.end());
  return std::make_unique<ServeProcess>(std::vector<std::string>{}, env,
                                        SpawnOptions{.start_as = StartAs::kRatelimit});
}

// `n` ShouldRateLimit calls over gRPC; the count answered OK.
int Call(int grpc_port, int n, const std::string& domain = "rl") {
  auto stub = pb::RateLimitService::NewStub(grpc::CreateChannel(
      fmt::format("127.0.0.1:{}", grpc_port), grpc::InsecureChannelCredentials()));
  int ok = 0;
  for (int i = 0; i < n; ++i) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kHangGuard);
    pb::RateLimitResponse response;
    const grpc::Status status = stub->ShouldRateLimit(
        &context,
        RlsRequest(domain,
                   {RlsDescriptor{{{"source_cluster", "proxy"}, {"destination_cluster", "mock"}}}}),
        &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    ok += response.overall_code() == pb::RateLimitResponse::OK;
  }
  return ok;
}

TEST(UpstreamStatsProcess, StatsdOverUdpCarriesUpstreamsNamesAndTags) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  StatsConfigRoot config;
  Ports ports;
  StatsListener statsd(SOCK_DGRAM);
  auto process =
      StartRatelimit(*redis, config, ports,
                     {"USE_STATSD=true", "STATSD_PROTOCOL=udp", "STATSD_HOST=127.0.0.1",
                      fmt::format("STATSD_PORT={}", statsd.port()), "EXTRA_TAGS=env:test"});
  ASSERT_TRUE(process->WaitListening(ports.http, kStart)) << process->Log();
  EXPECT_EQ(Call(ports.grpc, 5), 3);
  EXPECT_EQ(Call(ports.grpc, 1, "nope"), 1) << "no config for the domain: OK, as upstream";

  const std::string tag = ".__env=test";
  const std::string key = kKey;
  ASSERT_TRUE(statsd.ReadUntil([&](const std::string& text) {
    return Sum(text, key + ".total_hits" + tag) == 5 &&
           Sum(text, "ratelimit.service.rate_limit.nope.domain_not_found" + tag) == 1 &&
           Sum(text, "ratelimit_server.ShouldRateLimit.total_requests" + tag) == 6;
  })) << statsd.text();
  const std::string& text = statsd.text();
  EXPECT_EQ(Sum(text, key + ".within_limit" + tag), 3u) << text;
  EXPECT_EQ(Sum(text, key + ".over_limit" + tag), 2u) << text;
  EXPECT_EQ(Sum(text, key + ".near_limit" + tag), 1u) << "the third of 3, past 0.8 x 3";
  EXPECT_EQ(Sum(text, "ratelimit.service.config_load_success" + tag), 1u) << text;
  // One timer line per call, as upstream's interceptor sends them (whole milliseconds).
  ASSERT_TRUE(statsd.ReadUntil([&](const std::string& t) {
    return std::count(t.begin(), t.end(), '\n') > 0 &&
           t.find("ratelimit_server.ShouldRateLimit.response_time" + tag + ":") !=
               std::string::npos;
  }));
  EXPECT_THAT(text,
              ::testing::ContainsRegex(
                  "ratelimit_server\\.ShouldRateLimit\\.response_time\\.__env=test:[0-9]+\\|ms\n"));

  // The debug port's /stats: every counter by its upstream name, so far.
  const Answer stats = Http(ports.debug, beast::http::verb::get, "/stats");
  EXPECT_EQ(stats.status, 200);
  EXPECT_THAT(stats.body, HasSubstr(key + ".total_hits" + tag + ": 5\n"));
  EXPECT_THAT(stats.body, HasSubstr("ratelimit.service.config_load_success" + tag + ": 1\n"));
  EXPECT_EQ(process->Stop(kStart), 0) << process->Log();
}

TEST(UpstreamStatsProcess, StatsdOverTcpByDefault) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  StatsConfigRoot config;
  Ports ports;
  StatsListener statsd(SOCK_STREAM);
  // USE_STATSD unset: true, as upstream; STATSD_PROTOCOL unset: gostats' tcp.
  auto process =
      StartRatelimit(*redis, config, ports,
                     {"STATSD_HOST=127.0.0.1", fmt::format("STATSD_PORT={}", statsd.port())});
  ASSERT_TRUE(process->WaitListening(ports.http, kStart)) << process->Log();
  EXPECT_EQ(Call(ports.grpc, 2), 2);
  const std::string key = kKey;
  ASSERT_TRUE(statsd.ReadUntil([&](const std::string& text) {
    return Sum(text, key + ".total_hits") == 2 && Sum(text, key + ".within_limit") == 2;
  })) << statsd.text();
  EXPECT_EQ(process->Stop(kStart), 0) << process->Log();
}

TEST(UpstreamStatsProcess, DogStatsdTagsAndMogrifiers) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  StatsConfigRoot config;
  Ports ports;
  StatsListener agent(SOCK_DGRAM);
  auto process = StartRatelimit(
      *redis, config, ports,
      {"USE_STATSD=false", "USE_DOG_STATSD=true", "STATSD_HOST=127.0.0.1",
       fmt::format("STATSD_PORT={}", agent.port()), "DD_ENV=ci", "EXTRA_TAGS=app:rl",
       "USE_DOG_STATSD_MOGRIFIERS=limits",
       R"(DOG_STATSD_MOGRIFIER_LIMITS_PATTERN=^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$)",
       "DOG_STATSD_MOGRIFIER_LIMITS_NAME=ratelimit.service.rate_limit.$3",
       "DOG_STATSD_MOGRIFIER_LIMITS_TAGS=domain:$1,descriptor:$2"});
  ASSERT_TRUE(process->WaitListening(ports.http, kStart)) << process->Log();
  EXPECT_EQ(Call(ports.grpc, 1), 1);
  const std::string line =
      "ratelimit.service.rate_limit.total_hits:1|c|#env:ci,app:rl,"
      "descriptor:source_cluster_proxy.destination_cluster_mock,domain:rl\n";
  ASSERT_TRUE(agent.ReadUntil([&](const std::string& text) {
    return text.find(line) != std::string::npos;
  })) << agent.text();
  EXPECT_THAT(agent.text(),
              HasSubstr("ratelimit.service.config_load_success:1|c|#env:ci,app:rl\n"));
  EXPECT_THAT(agent.text(), ::testing::ContainsRegex(
                                "ratelimit_server\\.ShouldRateLimit\\.response_time:[0-9]+\\.000000"
                                "\\|ms\\|#env:ci,app:rl\n"));
  EXPECT_EQ(process->Stop(kStart), 0) << process->Log();
}

TEST(UpstreamStatsProcess, PrometheusScrapedWithUpstreamsMappedNames) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  StatsConfigRoot config;
  Ports ports;
  const int prometheus = FreeLoopbackPort();
  auto process = StartRatelimit(
      *redis, config, ports,
      {"USE_STATSD=false", "USE_PROMETHEUS=true",
       fmt::format("PROMETHEUS_ADDR=127.0.0.1:{}", prometheus), "PROMETHEUS_PATH=/prom"});
  ASSERT_TRUE(process->WaitListening(ports.http, kStart)) << process->Log();
  EXPECT_EQ(Call(ports.grpc, 4), 3);
  const std::string labels =
      R"({domain="rl",key1="source_cluster_proxy",key2="destination_cluster_mock"})";
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard;
  Answer scrape;
  while (std::chrono::steady_clock::now() < deadline) {
    scrape = Http(prometheus, beast::http::verb::get, "/prom");
    if (scrape.body.find("ratelimit_service_rate_limit_total_hits" + labels + " 4\n") !=
            std::string::npos &&
        scrape.body.find("ratelimit_service_response_time_seconds_count{grpc_method="
                         "\"ShouldRateLimit\"} 4\n") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(50));  // a poll of the scrape, not a wait for it
  }
  EXPECT_EQ(scrape.status, 200);
  EXPECT_THAT(scrape.body, HasSubstr("# TYPE ratelimit_service_rate_limit_total_hits counter\n"
                                     "ratelimit_service_rate_limit_total_hits" +
                                     labels + " 4\n"));
  EXPECT_THAT(scrape.body, HasSubstr("ratelimit_service_rate_limit_over_limit" + labels + " 1\n"));
  EXPECT_THAT(scrape.body,
              HasSubstr("ratelimit_service_rate_limit_within_limit" + labels + " 3\n"));
  EXPECT_THAT(scrape.body, HasSubstr("ratelimit_service_config_load_success 1\n"));
  EXPECT_THAT(scrape.body,
              HasSubstr("ratelimit_service_total_requests{grpc_method=\"ShouldRateLimit\"} 4\n"));
  EXPECT_THAT(scrape.body, HasSubstr("ratelimit_service_response_time_seconds_count{grpc_method="
                                     "\"ShouldRateLimit\"} 4\n"));
  EXPECT_EQ(Http(prometheus, beast::http::verb::get, "/metrics").status, 404);
  EXPECT_EQ(process->Stop(kStart), 0) << process->Log();
}

// Upstream's default, USE_STATSD=false: gostats' logging sink on stderr; DISABLE_STATS: nothing,
// even with a statsd sink asked for. The last flush is at the stop, so after the exit what was
// sent is all there.
TEST(UpstreamStatsProcess, LoggingSinkByDefaultAndNothingWhenDisabled) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  StatsConfigRoot config;
  {
    Ports ports;
    auto process = StartRatelimit(*redis, config, ports, {"USE_STATSD=false"});
    ASSERT_TRUE(process->WaitListening(ports.http, kStart)) << process->Log();
    EXPECT_EQ(Call(ports.grpc, 1), 1);
    EXPECT_EQ(process->Stop(kStart), 0) << process->Log();
    EXPECT_THAT(process->Log(),
                ::testing::ContainsRegex(
                    "\\{\"level\":\"debug\",\"ts\":[0-9]+\\.[0-9]{6},\"logger\":\"gostats\\."
                    "loggingsink\",\"msg\":\"flushing counter\",\"json\":\\{\"name\":\"" +
                    std::regex_replace(std::string(kKey), std::regex("\\."), "\\.") +
                    "\\.total_hits\",\"type\":\"counter\",\"value\":\"1\\.000000\"\\}\\}\n"));
    EXPECT_THAT(process->Log(), HasSubstr("\"msg\":\"flushing all stats\",\"json\":{\"type\":"
                                          "\"all stats\",\"value\":\"0.000000\"}}"));
  }
  Ports ports;
  StatsListener statsd(SOCK_DGRAM);
  auto process =
      StartRatelimit(*redis, config, ports,
                     {"USE_STATSD=true", "STATSD_PROTOCOL=udp", "STATSD_HOST=127.0.0.1",
                      fmt::format("STATSD_PORT={}", statsd.port()), "DISABLE_STATS=true"});
  ASSERT_TRUE(process->WaitListening(ports.http, kStart)) << process->Log();
  EXPECT_EQ(Call(ports.grpc, 1), 1);
  EXPECT_EQ(process->Stop(kStart), 0) << process->Log();
  EXPECT_EQ(statsd.Drain(), "");
  EXPECT_THAT(process->Log(), ::testing::Not(HasSubstr("gostats.loggingsink")));
}

}  // namespace
}  // namespace floodgate::testing

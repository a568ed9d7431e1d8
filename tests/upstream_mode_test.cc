// The binary started as envoyproxy/ratelimit's `ratelimit`, a process on a real redis-server.
//
// Upstream's docker-compose-example.yml environment (ports moved by PORT, GRPC_PORT, DEBUG_PORT,
// hosts on loopback): two replicas share one limit; the debug port; the start waits for Redis;
// refusals by name; HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED; JSON logs; signals.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "hang_guard.h"
#include "redis_server.h"
#include "rls_request.h"
#include "serve_process.h"

namespace floodgate::testing {
namespace {

namespace fs = std::filesystem;
namespace beast = boost::beast;
namespace pb = ::envoy::service::ratelimit::v3;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

// Starts, stops and reloads are waited for as events; the bound only ends a hang.
constexpr milliseconds kRatelimitStart = kHangGuard;

// A config root as upstream's compose file mounts it: <root>/ratelimit/config/<file>.
class ConfigRoot {
 public:
  ConfigRoot() {
    std::string dir = (fs::temp_directory_path() / "ratelimit-root-XXXXXX").string();
    if (mkdtemp(dir.data()) != nullptr) root_ = dir;
    fs::create_directories(root_ / "ratelimit" / "config");
  }
  ~ConfigRoot() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(root_ / "ratelimit" / "config" / name) << text;
  }
  std::string root() const { return root_.string(); }

 private:
  fs::path root_;
};

constexpr const char* kThreePerMinute = R"(domain: rl
descriptors:
  - key: source_cluster
    value: proxy
    descriptors:
      - key: destination_cluster
        value: mock
        rate_limit:
          unit: minute
          requests_per_unit: 3
)";

struct Ports {
  int http = FreeLoopbackPort();
  int grpc = FreeLoopbackPort();
  int debug = FreeLoopbackPort();
};

// docker-compose-example.yml's environment for the `ratelimit` service, every variable it sets,
// with Redis and the config root of the test, the ports moved and the hosts on loopback.
// USE_STATSD=true there, to a `statsd` host: false here (upstream_stats_process_test.cc sends
// statsd to the test's own listeners), so the stats go to the logging sink on stderr.
std::vector<std::string> ComposeEnvironment(const RedisServer& redis, const ConfigRoot& config,
                                            const Ports& ports) {
  return {"USE_STATSD=false",
          "STATSD_HOST=statsd",
          "STATSD_PORT=9125",
          "LOG_LEVEL=debug",
          "REDIS_SOCKET_TYPE=tcp",
          fmt::format("REDIS_URL=127.0.0.1:{}", redis.port()),
          "RUNTIME_ROOT=" + config.root(),
          "RUNTIME_SUBDIRECTORY=ratelimit",
          "RUNTIME_WATCH_ROOT=false",
          "CONFIG_TYPE=FILE",
          "CONFIG_GRPC_XDS_NODE_ID=test-node-id",
          "CONFIG_GRPC_XDS_SERVER_URL=ratelimit-xds-config-server:18000",
          "HOST=127.0.0.1",
          "GRPC_HOST=127.0.0.1",
          "DEBUG_HOST=127.0.0.1",
          fmt::format("PORT={}", ports.http),
          fmt::format("GRPC_PORT={}", ports.grpc),
          fmt::format("DEBUG_PORT={}", ports.debug)};
}

// The minute since the epoch on this host's clock, which is the servers' (one machine): the
// window of a MINUTE rule.
std::int64_t MinuteNow() {
  return std::chrono::duration_cast<std::chrono::minutes>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Waits (polling the clock, bounded) until the minute after `minute` has begun.
void WaitForMinuteAfter(std::int64_t minute) {
  const auto deadline = std::chrono::steady_clock::now() + kHangGuard + std::chrono::minutes(1);
  while (MinuteNow() <= minute && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(100));
  }
}

pb::RateLimitRequest ComposeRequest() {
  return RlsRequest(
      "rl", {RlsDescriptor{{{"source_cluster", "proxy"}, {"destination_cluster", "mock"}}}});
}

TEST(UpstreamModeProcess, TwoReplicasOnOneRedisAdmitTheLimitOnce) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  ConfigRoot config;
  config.Write("config.yaml", kThreePerMinute);
  Ports a, b;
  ServeProcess first({}, ComposeEnvironment(*redis, config, a), {.start_as = StartAs::kRatelimit});
  ServeProcess second({}, ComposeEnvironment(*redis, config, b), {.start_as = StartAs::kRatelimit});
  ASSERT_TRUE(first.WaitListening(a.http, kRatelimitStart)) << first.Log();
  ASSERT_TRUE(second.WaitListening(b.http, kRatelimitStart)) << second.Log();

  for (const Ports* ports : {&a, &b}) {
    const Answer health = Http(ports->http, beast::http::verb::get, "/healthcheck");
    EXPECT_EQ(health.status, 200);
    EXPECT_EQ(health.body, "OK");
    EXPECT_EQ(Http(ports->debug, beast::http::verb::get, "/rlconfig").body,
              "rl.source_cluster_proxy.destination_cluster_mock: unit=MINUTE "
              "requests_per_unit=3, shadow_mode: false, quota_mode: false\n");
  }
  EXPECT_EQ(Http(a.debug, beast::http::verb::get, "/").body,
            "/rlconfig: print out the currently loaded configuration for debugging\n"
            "/stats: print out stats\n");

  // Six requests over gRPC, alternating replicas, then one over /json on the second: three
  // admitted in all, and /json sees the shared count spent. The window is the clock's
  // minute: a round that began in one minute and ended in another is not judged (however
  // long its requests took), and the next begins once a fresh minute has (bounded: 3).
  auto channel_a =
      grpc::CreateChannel(fmt::format("127.0.0.1:{}", a.grpc), grpc::InsecureChannelCredentials());
  auto channel_b =
      grpc::CreateChannel(fmt::format("127.0.0.1:{}", b.grpc), grpc::InsecureChannelCredentials());
  auto stub_a = pb::RateLimitService::NewStub(channel_a);
  auto stub_b = pb::RateLimitService::NewStub(channel_b);
  bool judged = false;
  for (int round = 0; round < 3 && !judged; ++round) {
    const std::int64_t minute = MinuteNow();
    int admitted = 0;
    for (int i = 0; i < 6; ++i) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + kHangGuard);
      pb::RateLimitResponse response;
      const grpc::Status status =
          (i % 2 == 0 ? stub_a : stub_b)->ShouldRateLimit(&context, ComposeRequest(), &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      admitted += response.overall_code() == pb::RateLimitResponse::OK;
    }
    const Answer json = Http(b.http, beast::http::verb::post, "/json",
                             R"({"domain":"rl","descriptors":[{"entries":[)"
                             R"({"key":"source_cluster","value":"proxy"},)"
                             R"({"key":"destination_cluster","value":"mock"}]}]})");
    const std::int64_t ended_in = MinuteNow();
    if (ended_in != minute) {
      std::printf("round %d crossed a minute's end: not judged\n", round);
      WaitForMinuteAfter(ended_in);
      continue;
    }
    judged = true;
    EXPECT_EQ(admitted, 3) << "3/minute across both replicas";
    EXPECT_EQ(json.status, 429) << json.body;
  }
  EXPECT_TRUE(judged) << "every round crossed a minute's end";
  EXPECT_EQ(first.Stop(kRatelimitStart), 0);
  EXPECT_EQ(second.Stop(kRatelimitStart), 0);
}

// Upstream opens no port until Redis answers PING; floodgate's `ratelimit` neither, so no
// request is answered as if allowed while it has no Redis.
TEST(UpstreamModeProcess, PortsOpenOnlyOnceRedisAnswers) {
  ConfigRoot config;
  config.Write("config.yaml", kThreePerMinute);
  const int redis_port = FreeLoopbackPort();
  Ports ports;
  ServeProcess process(
      {},
      {"REDIS_SOCKET_TYPE=tcp", fmt::format("REDIS_URL=127.0.0.1:{}", redis_port),
       "RUNTIME_ROOT=" + config.root(), "RUNTIME_SUBDIRECTORY=ratelimit", "USE_STATSD=false",
       "HOST=127.0.0.1", "GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1",
       fmt::format("PORT={}", ports.http), fmt::format("GRPC_PORT={}", ports.grpc),
       fmt::format("DEBUG_PORT={}", ports.debug), "REDIS_STARTUP_INITIAL_INTERVAL=50ms",
       "REDIS_STARTUP_MAX_INTERVAL=100ms"},
      {.start_as = StartAs::kRatelimit});
  ASSERT_TRUE(process.WaitLogLines("Retrying Redis connection to", 2, kRatelimitStart))
      << process.Log();
  for (const int port : {ports.http, ports.grpc, ports.debug}) {
    EXPECT_FALSE(process.WaitListening(port, milliseconds(0))) << "port " << port << " is open";
  }
  auto redis = RedisServer::Start({}, redis_port);
  ASSERT_NE(redis, nullptr);
  EXPECT_TRUE(process.WaitListening(ports.http, kRatelimitStart)) << process.Log();
  EXPECT_TRUE(process.WaitListening(ports.grpc, kRatelimitStart));
  EXPECT_TRUE(process.WaitListening(ports.debug, kRatelimitStart));
  EXPECT_EQ(process.Stop(kRatelimitStart), 0);
}

TEST(UpstreamModeProcess, GivesUpOnRedisAfterMaxElapsedTime) {
  ServeProcess process(
      {},
      {"REDIS_SOCKET_TYPE=tcp", fmt::format("REDIS_URL=127.0.0.1:{}", FreeLoopbackPort()),
       "USE_STATSD=false", "REDIS_STARTUP_INITIAL_INTERVAL=20ms",
       "REDIS_STARTUP_MAX_ELAPSED_TIME=200ms"},
      {.start_as = StartAs::kRatelimit});
  EXPECT_EQ(process.WaitExit(kRatelimitStart), 2);
  EXPECT_THAT(process.Log(), HasSubstr("timed out waiting for Redis connection to"));
}

// A set variable whose feature floodgate lacks stops the start with its name and the reason;
// arguments are ignored, as upstream's binary ignores them.
TEST(UpstreamModeProcess, RefusesWhatItCannotHonourByName) {
  ServeProcess mapper({"--config", "/nonexistent"}, {"PROMETHEUS_MAPPER_YAML=/m.yaml"},
                      {.start_as = StartAs::kRatelimit});
  EXPECT_EQ(mapper.WaitExit(kRatelimitStart), 2);
  EXPECT_THAT(mapper.Log(), HasSubstr("PROMETHEUS_MAPPER_YAML=\"/m.yaml\": not supported"));
  ServeProcess tracing({}, {"USE_STATSD=false", "TRACING_ENABLED=true"},
                       {.start_as = StartAs::kRatelimit});
  EXPECT_EQ(tracing.WaitExit(kRatelimitStart), 2);
  EXPECT_THAT(tracing.Log(), HasSubstr("TRACING_ENABLED=\"true\": not supported"));
  ServeProcess xds_type({}, {"USE_STATSD=false", "CONFIG_TYPE=GRPC_XDS_DELTA"},
                        {.start_as = StartAs::kRatelimit});
  EXPECT_EQ(xds_type.WaitExit(kRatelimitStart), 2);
  EXPECT_THAT(xds_type.Log(), HasSubstr("Invalid setting for ConfigType"));
  ServeProcess port({}, {"USE_STATSD=false", "PORT="}, {.start_as = StartAs::kRatelimit});
  EXPECT_EQ(port.WaitExit(kRatelimitStart), 2);
  EXPECT_THAT(port.Log(), HasSubstr("PORT=\"\": \"\" is not an integer"));
}

TEST(UpstreamModeProcess, HealthyOnlyWithADomainWhenAsked) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  ConfigRoot config;  // an empty config directory: no domain
  Ports ports;
  auto env = ComposeEnvironment(*redis, config, ports);
  env.push_back("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED=true");
  env.push_back("LOG_FORMAT=json");
  env.push_back("LOG_LEVEL=info");
  ServeProcess process({}, env, {.start_as = StartAs::kRatelimit});
  ASSERT_TRUE(process.WaitListening(ports.http, kRatelimitStart)) << process.Log();
  const Answer unhealthy = Http(ports.http, beast::http::verb::get, "/healthcheck");
  EXPECT_EQ(unhealthy.status, 500);
  EXPECT_EQ(unhealthy.body, "");
  // gRPC health's "ratelimit" follows /healthcheck, as upstream's health checker sets both.
  auto health = ::grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      fmt::format("127.0.0.1:{}", ports.grpc), grpc::InsecureChannelCredentials()));
  const auto grpc_status = [&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kHangGuard);
    ::grpc::health::v1::HealthCheckRequest request;
    request.set_service("ratelimit");
    ::grpc::health::v1::HealthCheckResponse response;
    EXPECT_TRUE(health->Check(&context, request, &response).ok());
    return response.status();
  };
  EXPECT_EQ(grpc_status(), ::grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  config.Write("config.yaml", kThreePerMinute);
  const auto deadline = std::chrono::steady_clock::now() + kRatelimitStart;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    status = Http(ports.http, beast::http::verb::get, "/healthcheck").status;
    if (status == 200 && grpc_status() == ::grpc::health::v1::HealthCheckResponse::SERVING) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(status, 200) << "a domain loaded";
  EXPECT_EQ(grpc_status(), ::grpc::health::v1::HealthCheckResponse::SERVING);

  // LOG_FORMAT=json: every line one object with upstream's field names (but the stats'
  // logging sink's, USE_STATSD=false, which are gostats' own JSON, as upstream's are).
  EXPECT_EQ(process.Stop(kRatelimitStart), 0);
  std::istringstream lines(process.Log());
  int objects = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(json.is_object()) << line;
    if (json.value("logger", "") == "gostats.loggingsink") continue;
    EXPECT_TRUE(json.contains("@message") && json.contains("@timestamp") && json.contains("level"))
        << line;
    ++objects;
  }
  EXPECT_GE(objects, 2) << process.Log();
  EXPECT_THAT(process.Log(), HasSubstr(R"("level":"info")"));
}

// Upstream's HTTP port takes /json and /healthcheck; floodgate's /v1/check there took an
// inline policy from any client and counted it in the shared Redis. There are no rules in this
// mode, so /v1/* decide nothing: a policy is refused before it is read, and Redis holds no key.
TEST(UpstreamModeProcess, ClientsBringNoPolicyOfTheirOwn) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  ConfigRoot config;
  config.Write("config.yaml", kThreePerMinute);
  Ports ports;
  ServeProcess process({}, ComposeEnvironment(*redis, config, ports),
                       {.start_as = StartAs::kRatelimit});
  ASSERT_TRUE(process.WaitListening(ports.http, kRatelimitStart)) << process.Log();
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/check", R"({"key":"anyone","policy":"gcra:1000/1s"})"},
           {"/v1/reserve", R"({"key":"anyone","policy":"gcra:1000/1s","estimate":1})"},
           {"/v1/acquire", R"({"key":"anyone","policy":"concurrency:10"})"}}) {
    const Answer a = Http(ports.http, beast::http::verb::post, path, body);
    EXPECT_EQ(a.status, 403) << path << ": " << a.body;
    EXPECT_THAT(a.body, HasSubstr("inline policies are off")) << path;
  }
  const std::string keys = redis->Cli({"DBSIZE"});
  EXPECT_EQ(keys.substr(0, keys.find_first_of("\r\n")), "0") << keys;
  EXPECT_EQ(process.Stop(kRatelimitStart), 0) << process.Log();
}

// SIGHUP stops upstream (its runner cancels on SIGINT, SIGTERM and SIGHUP alike); `ratelimit`
// too, gracefully.
TEST(UpstreamModeProcess, SighupStopsAsUpstreams) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  ConfigRoot config;
  config.Write("config.yaml", kThreePerMinute);
  Ports ports;
  ServeProcess process({}, ComposeEnvironment(*redis, config, ports),
                       {.start_as = StartAs::kRatelimit});
  ASSERT_TRUE(process.WaitListening(ports.http, kRatelimitStart)) << process.Log();
  process.Signal(SIGHUP);
  EXPECT_EQ(process.WaitExit(kRatelimitStart), 0) << process.Log();
  EXPECT_THAT(process.Log(), HasSubstr("Received signal 1, initiating shutdown"));
}

}  // namespace
}  // namespace floodgate::testing

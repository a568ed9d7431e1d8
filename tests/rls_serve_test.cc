// `floodgate serve --grpc-listen` as a process, spoken to over the real wire.
//
// With the generated C++ stubs, as Envoy speaks to it (RLS v3) and as upstream's HTTP clients do
// (POST /json, GET /healthcheck).
//
// Two groups:
//  - Transport (RlsServe*): health, /healthcheck, /json, the gRPC address from upstream's
//    environment, graceful stop, health following Redis. They hold with any engine.
//  - Semantics (RlsEngine*, RlsRedisDown*): upstream's configuration and answers, on
//    memory, Redis and Cluster, and with Redis killed.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "alias_bomb.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "redis_server.h"
#include "rls_request.h"
#include "serve_process.h"

namespace floodgate::testing {
namespace {

namespace fs = std::filesystem;
namespace beast = boost::beast;
namespace pb = ::envoy::service::ratelimit::v3;
using Descriptor = ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;
using Code = pb::RateLimitResponse;  // Code::OK, Code::OVER_LIMIT

constexpr auto kStartLimit = milliseconds(10'000);

using D = RlsDescriptor;

// A gRPC client of one `serve`: RLS and health.
class RlsClient {
 public:
  explicit RlsClient(int port)
      : channel_(grpc::CreateChannel(fmt::format("127.0.0.1:{}", port),
                                     grpc::InsecureChannelCredentials())),
        rls_(pb::RateLimitService::NewStub(channel_)),
        health_(Health::NewStub(channel_)) {}

  struct Result {
    grpc::Status status;
    pb::RateLimitResponse response;
    Steady::duration took{};
  };
  Result Call(const pb::RateLimitRequest& request, milliseconds deadline = milliseconds(5000)) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    Result result;
    const auto begin = Steady::now();
    result.status = rls_->ShouldRateLimit(&context, request, &result.response);
    result.took = Steady::now() - begin;
    return result;
  }
  // The response, failing the test when the call fails.
  pb::RateLimitResponse Ask(const std::string& domain, const std::vector<D>& descriptors,
                            std::uint32_t hits_addend = 0) {
    Result r = Call(RlsRequest(domain, descriptors, hits_addend));
    EXPECT_TRUE(r.status.ok()) << r.status.error_code() << " " << r.status.error_message();
    return r.response;
  }
  std::optional<HealthCheckResponse::ServingStatus> Health(const std::string& service) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    if (!health_->Check(&context, request, &response).ok()) return std::nullopt;
    return response.status();
  }
  // Polls (bounded) until the health of `service` is `want`.
  bool WaitHealth(const std::string& service, HealthCheckResponse::ServingStatus want,
                  milliseconds limit) {
    const auto deadline = Steady::now() + limit;
    while (Steady::now() < deadline) {
      if (Health(service) == want) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::RateLimitService::Stub> rls_;
  std::unique_ptr<Health::Stub> health_;
};

// Upstream's runtime layout: <root>/<subdirectory>/config/*.yaml.
class RuntimeDir {
 public:
  RuntimeDir() {
    std::string dir = (fs::temp_directory_path() / "floodgate-rls-XXXXXX").string();
    if (mkdtemp(dir.data()) != nullptr) root_ = dir;
    fs::create_directories(config_dir());
  }
  ~RuntimeDir() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  fs::path config_dir() const { return root_ / "ratelimit" / "config"; }
  void Write(const std::string& name, const std::string& yaml) const {
    // Written aside and renamed in: the server never reads half a file.
    const fs::path tmp = root_ / (name + ".tmp");
    std::ofstream(tmp) << yaml;
    fs::rename(tmp, config_dir() / name);
  }
  std::vector<std::string> Env() const {
    return {"RUNTIME_ROOT=" + root_.string(), "RUNTIME_SUBDIRECTORY=ratelimit",
            "RUNTIME_IGNOREDOTFILES=true"};
  }
  const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

// A `serve` with gRPC on: its ports, its process, a client. Without RUNTIME_ROOT in `env`
// it reads an empty config directory of its own (serve refuses to start without one).
struct RlsServe {
  RlsServe(std::vector<std::string> args, std::vector<std::string> env)
      : http_port(FreeLoopbackPort()), grpc_port(FreeLoopbackPort()) {
    const bool has_root = std::any_of(env.begin(), env.end(), [](const std::string& e) {
      return e.starts_with("RUNTIME_ROOT=");
    });
    if (!has_root) {
      const auto own = empty_runtime.Env();
      env.insert(env.end(), own.begin(), own.end());
    }
    args.insert(args.end(), {"--listen", fmt::format("127.0.0.1:{}", http_port), "--grpc-listen",
                             fmt::format("127.0.0.1:{}", grpc_port)});
    process.emplace(std::move(args), std::move(env));
    client.emplace(grpc_port);
  }
  bool Start() {
    return process->WaitListening(grpc_port, kStartLimit) &&
           process->WaitListening(http_port, kStartLimit);
  }
  // Start(), then polls (bounded) until /readyz says the store answers: serve listens
  // before it has connected to Redis (lazy_connect), and decisions until then come from
  // on_error, which tests of exact counts must not see.
  bool StartReady() {
    if (!Start()) return false;
    const auto deadline = Steady::now() + kStartLimit;
    while (Steady::now() < deadline) {
      if (Http(http_port, beast::http::verb::get, "/readyz").status == 200) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }

  RuntimeDir empty_runtime;
  int http_port;
  int grpc_port;
  std::optional<ServeProcess> process;
  std::optional<RlsClient> client;
};

// ---------------------------------------------------------------------------------------
// Transport

TEST(RlsServe, AnswersHealthHealthcheckGrpcAndJson) {
  RlsServe serve({}, {});
  ASSERT_TRUE(serve.Start()) << serve.process->Log();
  EXPECT_EQ(serve.client->Health(""), HealthCheckResponse::SERVING);
  EXPECT_EQ(serve.client->Health("ratelimit"), HealthCheckResponse::SERVING);

  const Answer healthcheck = Http(serve.http_port, beast::http::verb::get, "/healthcheck");
  EXPECT_EQ(healthcheck.status, 200);
  EXPECT_EQ(healthcheck.body, "OK");

  // A domain no config names: OK, one status per descriptor, no limit (as upstream).
  const pb::RateLimitResponse r =
      serve.client->Ask("no-such-domain", {D{{{"a", "1"}}}, D{{{"b", ""}}}});
  EXPECT_EQ(r.overall_code(), Code::OK);
  ASSERT_EQ(r.statuses_size(), 2);
  for (const auto& status : r.statuses()) {
    EXPECT_EQ(status.code(), Code::OK);
    EXPECT_FALSE(status.has_current_limit());
  }

  const Answer json =
      Http(serve.http_port, beast::http::verb::post, "/json",
           R"({"domain":"no-such-domain","descriptors":[{"entries":[{"key":"a","value":"1"}]}]})");
  ASSERT_EQ(json.status, 200) << json.body;
  EXPECT_EQ(nlohmann::json::parse(json.body)["overallCode"], "OK");
  EXPECT_EQ(Http(serve.http_port, beast::http::verb::post, "/json", "{nope").status, 400);
}

TEST(RlsServe, TakesTheGrpcAddressFromUpstreamsEnvironment) {
  const int grpc_port = FreeLoopbackPort();
  const int http_port = FreeLoopbackPort();
  RuntimeDir runtime;
  std::vector<std::string> env = runtime.Env();
  env.insert(env.end(), {"GRPC_HOST=127.0.0.1", fmt::format("GRPC_PORT={}", grpc_port)});
  ServeProcess serve({"--listen", fmt::format("127.0.0.1:{}", http_port)}, env);
  ASSERT_TRUE(serve.WaitListening(grpc_port, kStartLimit)) << serve.Log();
  RlsClient client(grpc_port);
  EXPECT_EQ(client.Health("ratelimit"), HealthCheckResponse::SERVING);
}

TEST(RlsServe, RefusesUpstreamRedisSettingsItCannotMap) {
  const int http_port = FreeLoopbackPort();
  ServeProcess serve(
      {"--listen", fmt::format("127.0.0.1:{}", http_port)},
      {"REDIS_URL=/var/run/nutcracker/ratelimit.sock", "REDIS_TLS=true", "FLOODGATE_STORE="});
  EXPECT_FALSE(serve.WaitListening(http_port, kStartLimit));
  EXPECT_THAT(serve.Log(), ::testing::HasSubstr("Redis serves TLS on TCP only"));
}

// Upstream's unix socket settings reach a redis-server that listens on nothing else.
TEST(RlsServe, ServesOnUpstreamsUnixSocketSettings) {
  auto redis = RedisServer::StartOnUnixSocket();
  ASSERT_NE(redis, nullptr);
  RlsServe serve(
      {}, {"REDIS_SOCKET_TYPE=unix", "REDIS_URL=" + redis->unix_socket(), "FLOODGATE_STORE="});
  ASSERT_TRUE(serve.StartReady()) << serve.process->Log();
  // gRPC health follows the store's health watcher, which may report a beat after /readyz.
  EXPECT_TRUE(
      serve.client->WaitHealth("ratelimit", HealthCheckResponse::SERVING, milliseconds(5000)))
      << serve.process->Log();
  // The log reaches its file when the process flushes it, not by the time it answers.
  EXPECT_TRUE(
      serve.process->WaitLogLines("redis+unix://" + redis->unix_socket(), 1, milliseconds(5000)))
      << serve.process->Log();
}

// What serve reads at its start and at each reload is bounded as `config check` is
// (docs/security.md, "Configuration files"): a runtime directory holding /proc/kmsg hung the
// start; an alias bomb written while it runs (six deep took the server +464 MB and 14 s) is
// refused by its count, as is a FIFO, and the old config keeps answering.
TEST(RlsServe, ReadsItsConfigDirectoryWithinBoundsAtStartAndAtReloads) {
  RuntimeDir kmsg;
  kmsg.Write("a.yaml", "domain: a\n");
  fs::create_symlink("/proc/kmsg", kmsg.config_dir() / "kmsg.yaml");
  RlsServe refused({"--store", "memory://"}, kmsg.Env());
  EXPECT_FALSE(refused.Start());
  EXPECT_THAT(refused.process->Log(),
              ::testing::HasSubstr("kmsg.yaml: a file of /proc or /sys, not a config file"));

  RuntimeDir runtime;
  runtime.Write("a.yaml",
                "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: HOUR, "
                "requests_per_unit: 3}\n");
  RlsServe serve({"--store", "memory://"}, runtime.Env());
  ASSERT_TRUE(serve.Start()) << serve.process->Log();
  const D d{{{"k", "v"}}};
  const auto limit = [&] {
    return serve.client->Ask("a", {d}).statuses(0).current_limit().requests_per_unit();
  };
  EXPECT_EQ(limit(), 3u);
  runtime.Write("bomb.yaml", AliasBomb(10, 6));
  EXPECT_TRUE(serve.process->WaitLogLines("YAML nodes in one config once aliases are expanded", 1,
                                          milliseconds(10'000)))
      << serve.process->Log();
  EXPECT_EQ(limit(), 3u);
  fs::remove(runtime.config_dir() / "bomb.yaml");
  ASSERT_EQ(::mkfifo((runtime.config_dir() / "f.yaml").c_str(), 0600), 0);
  EXPECT_TRUE(serve.process->WaitLogLines(
      "f.yaml: a FIFO: config files are read from regular files only", 1, milliseconds(10'000)))
      << serve.process->Log();
  EXPECT_EQ(limit(), 3u);
}

TEST(RlsServe, SigtermStopsCleanly) {
  RlsServe serve({}, {});
  ASSERT_TRUE(serve.Start()) << serve.process->Log();
  ASSERT_TRUE(serve.client->Ask("d", {D{{{"k", "v"}}}}).IsInitialized());
  EXPECT_EQ(serve.process->Stop(milliseconds(15'000)), 0) << serve.process->Log();
}

// gRPC health follows the store like /readyz: NOT_SERVING while Redis is away, SERVING
// again once it answers.
TEST(RlsServe, HealthFollowsRedis) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  RlsServe serve({"--store", redis->url()}, {});
  ASSERT_TRUE(serve.Start()) << serve.process->Log();
  ASSERT_TRUE(
      serve.client->WaitHealth("ratelimit", HealthCheckResponse::SERVING, milliseconds(5000)));
  redis->Kill();
  EXPECT_TRUE(
      serve.client->WaitHealth("ratelimit", HealthCheckResponse::NOT_SERVING, milliseconds(5000)))
      << serve.process->Log();
  EXPECT_EQ(serve.client->Health(""), HealthCheckResponse::NOT_SERVING);
  ASSERT_TRUE(redis->Restart());
  EXPECT_TRUE(
      serve.client->WaitHealth("ratelimit", HealthCheckResponse::SERVING, milliseconds(5000)))
      << serve.process->Log();
}

// ---------------------------------------------------------------------------------------
// Semantics: envoyproxy/ratelimit's configuration, unchanged (needs the real engine)

// Every feature the tests below touch, in upstream's syntax.
constexpr const char* kConfig = R"(domain: e2e
descriptors:
  - key: source_cluster
    value: proxy
    descriptors:
      - key: destination_cluster
        value: bar
        rate_limit: {unit: DAY, requests_per_unit: 3}
      - key: destination_cluster
        rate_limit: {unit: DAY, requests_per_unit: 5}
  - key: path
    value: "/api/*"
    rate_limit: {unit: DAY, requests_per_unit: 4}
  - key: path
    value: "/api/admin"
    rate_limit: {unit: DAY, requests_per_unit: 1}
  - key: remote_address
    rate_limit: {unit: DAY, requests_per_unit: 2}
  - key: per_second
    rate_limit: {unit: SECOND, requests_per_unit: 1000000}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: DAY, requests_per_unit: 1}
  - key: unlimited
    rate_limit: {unlimited: true}
  - key: strict
    rate_limit: {unit: DAY, requests_per_unit: 1, name: strict}
  - key: relaxed
    rate_limit:
      unit: DAY
      requests_per_unit: 100
      replaces:
        - name: strict
)";

enum class StoreKind { kMemory, kRedis, kCluster };

std::string Name(StoreKind kind) {
  switch (kind) {
    case StoreKind::kMemory:
      return "memory";
    case StoreKind::kRedis:
      return "redis";
    case StoreKind::kCluster:
      break;
  }
  return "cluster";
}

class RlsEngine : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    runtime_.Write("config.yaml", kConfig);
    std::string store = "memory://";
    if (GetParam() == StoreKind::kRedis) {
      redis_ = RedisServer::Start();
      ASSERT_NE(redis_, nullptr);
      store = redis_->url();
    } else if (GetParam() == StoreKind::kCluster) {
      cluster_ = RedisCluster::Shared();
      ASSERT_NE(cluster_, nullptr);
      store = cluster_->url();
    }
    Launch(store, {});
  }
  void Launch(const std::string& store, std::vector<std::string> extra_env) {
    std::vector<std::string> env = runtime_.Env();
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    serve_.emplace(std::vector<std::string>{"--store", store}, env);
    ASSERT_TRUE(serve_->StartReady()) << serve_->process->Log();
  }
  RlsClient& client() { return *serve_->client; }
  // Polls (bounded) until `check` holds for a fresh answer (a reload to take effect).
  template <class Check>
  bool WaitFor(const std::string& domain, const std::vector<D>& descriptors, Check check) {
    const auto deadline = Steady::now() + milliseconds(10'000);
    while (Steady::now() < deadline) {
      const auto r = client().Call(RlsRequest(domain, descriptors, 0));
      if (r.status.ok() && check(r.response)) return true;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return false;
  }

  RuntimeDir runtime_;
  std::unique_ptr<RedisServer> redis_;
  RedisCluster* cluster_ = nullptr;
  std::optional<RlsServe> serve_;
};

// n requests on `d`: the codes, in order.
std::vector<pb::RateLimitResponse::Code> Codes(RlsClient& client, const D& d, int n) {
  std::vector<pb::RateLimitResponse::Code> codes;
  for (int i = 0; i < n; ++i) codes.push_back(client.Ask("e2e", {d}).overall_code());
  return codes;
}
std::vector<pb::RateLimitResponse::Code> Allowed(int ok, int over) {
  std::vector<pb::RateLimitResponse::Code> codes(ok, Code::OK);
  codes.insert(codes.end(), over, Code::OVER_LIMIT);
  return codes;
}

TEST_P(RlsEngine, CountsPerUnitAndAnswersUpstreamsFields) {
  const D d{{{"remote_address", "10.0.0.1"}}};
  for (std::uint32_t i = 1; i <= 3; ++i) {
    const auto r = client().Ask("e2e", {d});
    ASSERT_EQ(r.statuses_size(), 1);
    const auto& s = r.statuses(0);
    EXPECT_EQ(r.overall_code(), i <= 2 ? Code::OK : Code::OVER_LIMIT) << i;
    EXPECT_EQ(s.limit_remaining(), i <= 2 ? 2 - i : 0) << i;
    EXPECT_EQ(s.current_limit().requests_per_unit(), 2u);
    EXPECT_EQ(s.current_limit().unit(), pb::RateLimitResponse::RateLimit::DAY);
    // A day window aligned to the epoch: it ends within a day.
    EXPECT_GT(s.duration_until_reset().seconds() + s.duration_until_reset().nanos(), 0);
    EXPECT_LE(s.duration_until_reset().seconds(), 86'400);
  }
  // Each value of a key-only rule has its own counter.
  EXPECT_EQ(client().Ask("e2e", {D{{{"remote_address", "10.0.0.2"}}}}).overall_code(), Code::OK);
  // A per-second window resets within the second.
  const auto second = client().Ask("e2e", {D{{{"per_second", "x"}}}});
  EXPECT_LE(second.statuses(0).duration_until_reset().seconds(), 1);
  // /metrics counts the hits per limit, named by upstream's stats key (the default node's
  // key, every value together): 4 hits, 3 within the limit, 1 over.
  const Answer metrics = Http(serve_->http_port, beast::http::verb::get, "/metrics");
  ASSERT_EQ(metrics.status, 200);
  using ::testing::HasSubstr;
  EXPECT_THAT(metrics.body,
              HasSubstr("floodgate_rls_total_hits_total{key=\"e2e.remote_address\"} 4\n"));
  EXPECT_THAT(metrics.body,
              HasSubstr("floodgate_rls_within_limit_total{key=\"e2e.remote_address\"} 3\n"));
  EXPECT_THAT(metrics.body,
              HasSubstr("floodgate_rls_over_limit_total{key=\"e2e.remote_address\"} 1\n"));
  EXPECT_THAT(metrics.body, HasSubstr("# HELP floodgate_rls_config_load_total"));
  EXPECT_THAT(metrics.body, HasSubstr("floodgate_rls_config_load_total{result=\"error\"} 0\n"));
}

TEST_P(RlsEngine, MatchesExactThenWildcardThenDefaultByTheLastEntry) {
  const auto limit_of = [&](const D& d) -> std::uint32_t {
    const auto r = client().Ask("e2e", {d});
    return r.statuses(0).has_current_limit() ? r.statuses(0).current_limit().requests_per_unit()
                                             : 0;
  };
  EXPECT_EQ(limit_of(D{{{"source_cluster", "proxy"}, {"destination_cluster", "bar"}}}), 3u)
      << "nested, exact value";
  EXPECT_EQ(limit_of(D{{{"source_cluster", "proxy"}, {"destination_cluster", "baz"}}}), 5u)
      << "nested, the key-only default";
  EXPECT_EQ(limit_of(D{{{"source_cluster", "proxy"}}}), 0u)
      << "the last entry reaches a node without a limit";
  EXPECT_EQ(limit_of(D{{{"source_cluster", "proxy"}, {"destination_cluster", "bar"}, {"x", "y"}}}),
            0u)
      << "the last entry matches nothing";
  EXPECT_EQ(limit_of(D{{{"source_cluster", "other"}, {"destination_cluster", "bar"}}}), 0u);
  EXPECT_EQ(limit_of(D{{{"path", "/api/admin"}}}), 1u) << "an exact value before a wildcard";
  EXPECT_EQ(limit_of(D{{{"path", "/api/users"}}}), 4u) << "the wildcard";
  EXPECT_EQ(limit_of(D{{{"path", "/web"}}}), 0u);
  EXPECT_EQ(Codes(client(), D{{{"source_cluster", "proxy"}, {"destination_cluster", "bar"}}}, 3),
            Allowed(2, 1))
      << "one was spent above";
}

TEST_P(RlsEngine, HitsAddendPerRequestAndPerDescriptor) {
  const D d{{{"source_cluster", "proxy"}, {"destination_cluster", "hits"}}};  // 5 a day
  auto r = client().Ask("e2e", {d}, 2);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 3u);
  D check = d;
  check.hits_addend = 0;  // checks without counting
  r = client().Ask("e2e", {check}, 2);
  EXPECT_EQ(r.overall_code(), Code::OK);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 3u);
  D big = d;
  big.hits_addend = 4;  // the descriptor's own addend wins over the request's
  r = client().Ask("e2e", {big}, 1);
  EXPECT_EQ(r.overall_code(), Code::OVER_LIMIT) << "3 + 4 exceeds 5";
}

TEST_P(RlsEngine, LimitOverrideFromTheRequest) {
  D d{{{"remote_address", "override"}}};  // 2 a day in the config
  d.limit = std::pair{1u, ::envoy::type::v3::RateLimitUnit::DAY};
  const auto r = client().Ask("e2e", {d});
  EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 1u);
  EXPECT_EQ(client().Ask("e2e", {d}).overall_code(), Code::OVER_LIMIT);
}

TEST_P(RlsEngine, ShadowUnlimitedReplacesAndUnknownDomain) {
  // A shadow rule is counted, never denies.
  EXPECT_EQ(Codes(client(), D{{{"shadow", "s"}}}, 3), Allowed(3, 0));
  // Unlimited: OK, the most remaining there is, no limit.
  const auto unlimited = client().Ask("e2e", {D{{{"unlimited", "u"}}}});
  EXPECT_EQ(unlimited.statuses(0).limit_remaining(), 4294967295u);
  EXPECT_FALSE(unlimited.statuses(0).has_current_limit());
  // "relaxed" replaces "strict" in a request that meets both.
  for (int i = 0; i < 3; ++i) {
    const auto r = client().Ask("e2e", {D{{{"strict", "a"}}}, D{{{"relaxed", "a"}}}});
    EXPECT_EQ(r.overall_code(), Code::OK) << i;
  }
  EXPECT_EQ(Codes(client(), D{{{"strict", "b"}}}, 2), Allowed(1, 1)) << "alone, strict applies";
  // A domain no file names.
  const auto unknown = client().Ask("nope", {D{{{"remote_address", "x"}}}});
  EXPECT_EQ(unknown.overall_code(), Code::OK);
  EXPECT_FALSE(unknown.statuses(0).has_current_limit());
}

TEST_P(RlsEngine, JsonAnswers429OverTheLimit) {
  const std::string body =
      R"({"domain":"e2e","descriptors":[{"entries":[{"key":"remote_address","value":"json"}]}]})";
  std::vector<int> statuses;
  for (int i = 0; i < 3; ++i) {
    statuses.push_back(Http(serve_->http_port, beast::http::verb::post, "/json", body).status);
  }
  EXPECT_EQ(statuses, (std::vector<int>{200, 200, 429}));
}

TEST_P(RlsEngine, ReloadsTheDirectoryAndKeepsTheOldConfigWhenTheNewOneIsBad) {
  const D d{{{"k", "v"}}};
  EXPECT_FALSE(client().Ask("second", {d}).statuses(0).has_current_limit());
  runtime_.Write("second.yaml", R"(domain: second
descriptors:
  - key: k
    rate_limit: {unit: HOUR, requests_per_unit: 7}
)");
  EXPECT_TRUE(WaitFor("second", {d}, [](const pb::RateLimitResponse& r) {
    return r.statuses(0).current_limit().requests_per_unit() == 7;
  })) << serve_->process->Log();
  // A bad file: refused with upstream's reason and the file's name; the old config stays.
  runtime_.Write("second.yaml", R"(domain: second
descriptors:
  - key: k
    rate_limit: {unit: FORTNIGHT, requests_per_unit: 8}
)");
  EXPECT_TRUE(serve_->process->WaitLogLines("invalid rate limit unit", 1, milliseconds(10'000)))
      << serve_->process->Log();
  EXPECT_THAT(serve_->process->Log(), ::testing::HasSubstr("second.yaml"));
  EXPECT_EQ(client().Ask("second", {d}).statuses(0).current_limit().requests_per_unit(), 7u);
  EXPECT_EQ(client()
                .Ask("e2e", {D{{{"remote_address", "after"}}}})
                .statuses(0)
                .current_limit()
                .requests_per_unit(),
            2u);
}

// Kubernetes mounts a ConfigMap as symlinks into a `..data` link that it swaps to a new
// timestamped directory.
TEST_P(RlsEngine, ReloadsOnAConfigMapSymlinkSwap) {
  const fs::path dir = runtime_.config_dir();
  fs::remove(dir / "config.yaml");
  const auto version = [&](const std::string& name, int per_hour) {
    fs::create_directories(dir / name);
    std::ofstream(dir / name / "config.yaml") << fmt::format(
        "domain: swap\ndescriptors:\n  - key: k\n    rate_limit: {{unit: HOUR, "
        "requests_per_unit: {}}}\n",
        per_hour);
  };
  version("..v1", 11);
  fs::create_directory_symlink("..v1", dir / "..data");
  fs::create_symlink("..data/config.yaml", dir / "config.yaml");
  const D d{{{"k", "v"}}};
  ASSERT_TRUE(WaitFor("swap", {d}, [](const pb::RateLimitResponse& r) {
    return r.statuses(0).current_limit().requests_per_unit() == 11;
  })) << serve_->process->Log();
  version("..v2", 22);
  fs::create_directory_symlink("..v2", dir / "..data_tmp");
  fs::rename(dir / "..data_tmp", dir / "..data");  // atomic, as the kubelet does
  EXPECT_TRUE(WaitFor("swap", {d}, [](const pb::RateLimitResponse& r) {
    return r.statuses(0).current_limit().requests_per_unit() == 22;
  })) << serve_->process->Log();
}

INSTANTIATE_TEST_SUITE_P(Stores, RlsEngine,
                         ::testing::Values(StoreKind::kMemory, StoreKind::kRedis,
                                           StoreKind::kCluster),
                         [](const auto& info) { return Name(info.param); });

// Upstream's process-wide switches, from its environment variables.
TEST(RlsEngineEnvironment, GlobalShadowModeAndResponseHeaders) {
  RuntimeDir runtime;
  runtime.Write("config.yaml", kConfig);
  std::vector<std::string> env = runtime.Env();
  env.insert(env.end(), {"SHADOW_MODE=true", "LIMIT_RESPONSE_HEADERS_ENABLED=true"});
  RlsServe serve({}, env);
  ASSERT_TRUE(serve.Start()) << serve.process->Log();
  const D d{{{"remote_address", "shadowed"}}};  // 2 a day
  pb::RateLimitResponse r;
  for (int i = 0; i < 3; ++i) r = serve.client->Ask("e2e", {d});
  EXPECT_EQ(r.overall_code(), Code::OK) << "global shadow mode answers OK";
  EXPECT_EQ(r.statuses(0).code(), Code::OVER_LIMIT) << "and still reports the descriptor";
  std::map<std::string, std::string> headers;
  for (const auto& h : r.response_headers_to_add()) headers[h.key()] = h.value();
  EXPECT_EQ(headers["RateLimit-Limit"], "2");
  EXPECT_EQ(headers["RateLimit-Remaining"], "0");
  EXPECT_FALSE(headers["RateLimit-Reset"].empty());
}

// ---------------------------------------------------------------------------------------
// Redis killed: every answer within the store timeout plus a margin, by on_error; never
// two timeouts in a row (the breaker). The timeout is long enough (200 ms) that a
// request which waited it out is told apart from one a loaded CI machine (two sanitizer
// trees, ctest -j2) descheduled for a while, and the margin (600 ms) is generous yet
// below the 1 s connect timeout, so an answer that waited for a reconnect still fails.

constexpr auto kStoreTimeout = milliseconds(200);
constexpr auto kTimeoutAndMargin = kStoreTimeout + milliseconds(600);

struct DownCase {
  std::string on_error;  // store.on_error, or "error" for rls.on_error
  // Expected per request (the limit is 2 a day): local counts locally.
  std::vector<pb::RateLimitResponse::Code> codes;
};

class RlsRedisDown : public ::testing::TestWithParam<DownCase> {};

TEST_P(RlsRedisDown, AnswersWithinTheTimeoutByOnError) {
  auto redis = RedisServer::Start();
  ASSERT_NE(redis, nullptr);
  RuntimeDir runtime;
  runtime.Write("config.yaml", kConfig);
  const bool error = GetParam().on_error == "error";
  const fs::path config_file = runtime.root() / "floodgate.yaml";
  std::ofstream(config_file) << fmt::format(
      "store:\n  url: {}\n  timeout: {}ms\n  on_error: {}\n{}", redis->url(), kStoreTimeout.count(),
      error ? "fail_open" : GetParam().on_error, error ? "rls:\n  on_error: error\n" : "");
  RlsServe serve({"--config", config_file.string()}, runtime.Env());
  ASSERT_TRUE(serve.StartReady()) << serve.process->Log();
  ASSERT_EQ(serve.client->Ask("e2e", {D{{{"remote_address", "warm"}}}}).overall_code(), Code::OK);
  redis->Kill();
  int slow_in_a_row = 0;
  int most_slow_in_a_row = 0;
  for (std::size_t i = 0; i < std::max<std::size_t>(GetParam().codes.size(), 10); ++i) {
    const auto r = serve.client->Call(RlsRequest("e2e", {D{{{"remote_address", "down"}}}}));
    EXPECT_LE(r.took, kTimeoutAndMargin) << i;
    slow_in_a_row = r.took >= kStoreTimeout ? slow_in_a_row + 1 : 0;
    most_slow_in_a_row = std::max(most_slow_in_a_row, slow_in_a_row);
    if (error) {
      EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << i;
      continue;
    }
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    if (i < GetParam().codes.size()) {
      EXPECT_EQ(r.response.overall_code(), GetParam().codes[i]) << i;
    }
  }
  EXPECT_LE(most_slow_in_a_row, 1) << "the breaker: never two timeouts in a row";
}

INSTANTIATE_TEST_SUITE_P(OnError, RlsRedisDown,
                         ::testing::Values(DownCase{"fail_open", Allowed(4, 0)},
                                           DownCase{"fail_closed", Allowed(0, 4)},
                                           DownCase{"local", Allowed(2, 2)}, DownCase{"error", {}}),
                         [](const auto& info) { return info.param.on_error; });

// ---------------------------------------------------------------------------------------
// examples/envoy: Envoy's config points at floodgate, and floodgate reads the example's
// ratelimit config (Envoy is not a Debian package: it is not started here).

TEST(EnvoyExample, EnvoyConfigPointsAtFloodgatesGrpcPortAndDomain) {
  const fs::path dir = fs::path(FLOODGATE_EXAMPLES_DIR) / "envoy";
  const YAML::Node envoy = YAML::LoadFile((dir / "envoy.yaml").string());
  const YAML::Node ratelimit =
      YAML::LoadFile((dir / "ratelimit" / "config" / "config.yaml").string());
  const YAML::Node floodgate = YAML::LoadFile((dir / "floodgate.yaml").string());

  // The cluster floodgate runs as, speaking HTTP/2, on floodgate's gRPC port.
  const std::string grpc_listen = floodgate["grpc_listen"].as<std::string>();
  const std::string grpc_port = grpc_listen.substr(grpc_listen.rfind(':') + 1);
  std::string rls_cluster;
  bool http2 = false;
  std::string cluster_port;
  for (const auto& cluster : envoy["static_resources"]["clusters"]) {
    if (cluster["name"].as<std::string>() != "floodgate") continue;
    rls_cluster = "floodgate";
    http2 = static_cast<bool>(cluster["typed_extension_protocol_options"]);
    cluster_port = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
                          ["address"]["socket_address"]["port_value"]
                              .as<std::string>();
  }
  ASSERT_EQ(rls_cluster, "floodgate");
  EXPECT_TRUE(http2) << "gRPC needs HTTP/2 to the cluster";
  EXPECT_EQ(cluster_port, grpc_port);

  // The rate limit filter names that cluster and the ratelimit config's domain, and asks
  // for v3.
  bool found_filter = false;
  for (const auto& listener : envoy["static_resources"]["listeners"]) {
    for (const auto& chain : listener["filter_chains"]) {
      for (const auto& filter : chain["filters"]) {
        const YAML::Node hcm = filter["typed_config"];
        for (const auto& http_filter : hcm["http_filters"]) {
          if (http_filter["name"].as<std::string>() != "envoy.filters.http.ratelimit") continue;
          found_filter = true;
          const YAML::Node rl = http_filter["typed_config"];
          EXPECT_EQ(rl["domain"].as<std::string>(), ratelimit["domain"].as<std::string>());
          EXPECT_EQ(rl["rate_limit_service"]["transport_api_version"].as<std::string>(), "V3");
          EXPECT_EQ(rl["rate_limit_service"]["grpc_service"]["envoy_grpc"]["cluster_name"]
                        .as<std::string>(),
                    rls_cluster);
        }
      }
    }
  }
  EXPECT_TRUE(found_filter);
}

TEST(EnvoyExample, FloodgateLoadsTheExampleRatelimitConfig) {
  const fs::path dir = fs::path(FLOODGATE_EXAMPLES_DIR) / "envoy";
  RlsServe serve({}, {"RUNTIME_ROOT=" + dir.string(), "RUNTIME_SUBDIRECTORY=ratelimit",
                      "RUNTIME_IGNOREDOTFILES=true"});
  ASSERT_TRUE(serve.Start()) << serve.process->Log();
  const YAML::Node ratelimit =
      YAML::LoadFile((dir / "ratelimit" / "config" / "config.yaml").string());
  // The example's first rule, as Envoy's actions produce it: a limit comes back.
  const auto r = serve.client->Ask(ratelimit["domain"].as<std::string>(),
                                   {D{{{"remote_address", "192.0.2.1"}}}});
  EXPECT_TRUE(r.statuses(0).has_current_limit()) << serve.process->Log();
}

}  // namespace
}  // namespace floodgate::testing

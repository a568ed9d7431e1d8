// The RLS v3 transport in process, on test-double engines: gRPC, POST /json, /healthcheck.
//
// The engine's semantics are tested with the engine. Here: the gRPC server over a real loopback
// channel (inline and asynchronous answers, status mapping, health, graceful shutdown), POST /json
// and GET /healthcheck on the HTTP service, and upstream's Redis settings mapped onto a store URL.
#include <floodgate/memory_store.h>
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "hang_guard.h"
#include "server/config.h"
#include "server/rls/grpc_server.h"
#include "server/service.h"

namespace floodgate::server::rls {
namespace {

using namespace std::chrono_literals;
// Deadlines and waits here are guards against a hang, never claims of speed.
constexpr std::chrono::milliseconds kGuard = floodgate::testing::kHangGuard;
using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

// Answers OVER_LIMIT for domain "deny", the error its name asks for for domains
// "error:<code>", OK otherwise; one status per descriptor; counts calls.
class ScriptedEngine : public Engine {
 public:
  void ShouldRateLimit(const pb::RateLimitRequest& request, pb::RateLimitResponse* response,
                       RlsDone done) override {
    ++calls;
    if (request.domain().rfind("error:", 0) == 0) {
      return done(absl::Status(static_cast<absl::StatusCode>(std::stoi(request.domain().substr(6))),
                               "scripted failure"));
    }
    const bool deny = request.domain() == "deny";
    response->set_overall_code(deny ? pb::RateLimitResponse::OVER_LIMIT
                                    : pb::RateLimitResponse::OK);
    for (int i = 0; i < request.descriptors_size(); ++i) {
      auto* status = response->add_statuses();
      status->set_code(deny ? pb::RateLimitResponse::OVER_LIMIT : pb::RateLimitResponse::OK);
      status->set_limit_remaining(static_cast<std::uint32_t>(100 - request.hits_addend()));
    }
    done(absl::OkStatus());
  }
  std::atomic<int> calls{0};
};

// Holds every call until Release(): answers them later, on its own thread, as a store's
// I/O thread would.
class HeldEngine : public Engine {
 public:
  ~HeldEngine() override { Release(); }
  void ShouldRateLimit(const pb::RateLimitRequest&, pb::RateLimitResponse* response,
                       RlsDone done) override {
    std::lock_guard lock(mutex_);
    held_.push_back({response, std::move(done)});
    max_held_ = std::max(max_held_, held_.size());
    held_changed_.notify_all();
  }
  // The most calls held at once so far.
  std::size_t max_held() {
    std::lock_guard lock(mutex_);
    return max_held_;
  }
  // Waits (bounded) until `n` calls are held.
  bool WaitHeld(std::size_t n, std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex_);
    return held_changed_.wait_for(lock, limit, [&] { return held_.size() >= n; });
  }
  // Answers every held call OK on a thread of its own.
  void Release() {
    std::deque<Held> calls;
    {
      std::lock_guard lock(mutex_);
      calls.swap(held_);
    }
    std::thread([calls = std::move(calls)]() mutable {
      for (auto& call : calls) {
        call.response->set_overall_code(pb::RateLimitResponse::OK);
        std::move(call.done)(absl::OkStatus());
      }
    }).join();
  }

 private:
  struct Held {
    pb::RateLimitResponse* response;
    RlsDone done;
  };
  std::mutex mutex_;
  std::condition_variable held_changed_;
  std::deque<Held> held_;
  std::size_t max_held_ = 0;
};

pb::RateLimitRequest MakeRequest(const std::string& domain, int descriptors = 1) {
  pb::RateLimitRequest request;
  request.set_domain(domain);
  for (int i = 0; i < descriptors; ++i) {
    auto* entry = request.add_descriptors()->add_entries();
    entry->set_key("key");
    entry->set_value(std::to_string(i));
  }
  return request;
}

class GrpcServerTest : public ::testing::Test {
 protected:
  void StartOn(Engine& engine, int threads = 0) {
    server_.emplace(engine, GrpcOptions{"127.0.0.1", 0, threads});
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_NE(server_->port(), 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    rls_ = pb::RateLimitService::NewStub(channel_);
    health_ = Health::NewStub(channel_);
  }
  grpc::Status Call(const pb::RateLimitRequest& request, pb::RateLimitResponse& response,
                    std::chrono::milliseconds deadline = kGuard) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    return rls_->ShouldRateLimit(&context, request, &response);
  }
  HealthCheckResponse::ServingStatus HealthOf(const std::string& service) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kGuard);
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    const grpc::Status status = health_->Check(&context, request, &response);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND)
      return HealthCheckResponse::SERVICE_UNKNOWN;
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.status();
  }

  // The engine most tests serve, declared before server_ so that the server's threads are
  // joined before it goes: it answers inline, with nothing (no lock) that would order its
  // last call before its destruction otherwise (TSan saw its vptr race with ~Engine).
  ScriptedEngine scripted_;
  std::optional<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::RateLimitService::Stub> rls_;
  std::unique_ptr<Health::Stub> health_;
};

TEST_F(GrpcServerTest, AnswersWhatTheEngineAnswers) {
  ScriptedEngine& engine = scripted_;
  StartOn(engine);
  pb::RateLimitResponse response;
  ASSERT_TRUE(Call(MakeRequest("ok", 3), response).ok());
  EXPECT_EQ(response.overall_code(), pb::RateLimitResponse::OK);
  ASSERT_EQ(response.statuses_size(), 3);
  EXPECT_EQ(response.statuses(2).limit_remaining(), 100u);

  pb::RateLimitResponse denied;
  ASSERT_TRUE(Call(MakeRequest("deny", 2), denied).ok());
  EXPECT_EQ(denied.overall_code(), pb::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(denied.statuses(1).code(), pb::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(engine.calls.load(), 2);
}

TEST_F(GrpcServerTest, EngineErrorsReachTheClientWithTheirCode) {
  ScriptedEngine& engine = scripted_;
  StartOn(engine);
  for (const auto code : {absl::StatusCode::kUnavailable, absl::StatusCode::kInvalidArgument,
                          absl::StatusCode::kInternal}) {
    pb::RateLimitResponse response;
    const grpc::Status status =
        Call(MakeRequest("error:" + std::to_string(static_cast<int>(code))), response);
    EXPECT_EQ(static_cast<int>(status.error_code()), static_cast<int>(code));
    EXPECT_EQ(status.error_message(), "scripted failure");
  }
}

TEST(GrpcStatus, MapsAbslCodesOneToOne) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_EQ(ToGrpcStatus(absl::UnavailableError("x")).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError("x")).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ToGrpcStatus(absl::DeadlineExceededError("x")).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(ToGrpcStatus(absl::UnauthenticatedError("x")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

// A call waiting on the engine holds no thread: 64 calls wait on the engine at once on
// one serving thread, and all finish when the engine answers on its own thread.
TEST_F(GrpcServerTest, CallsWaitingOnTheEngineHoldNoThread) {
  HeldEngine engine;
  StartOn(engine, 1);
  constexpr int kCalls = 64;
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < kCalls; ++i) {
    clients.emplace_back([&] {
      pb::RateLimitResponse response;
      if (Call(MakeRequest("held"), response, kGuard).ok() &&
          response.overall_code() == pb::RateLimitResponse::OK) {
        ++ok;
      }
    });
  }
  ASSERT_TRUE(engine.WaitHeld(kCalls, kGuard));
  EXPECT_EQ(ok.load(), 0);
  engine.Release();
  for (auto& client : clients) client.join();
  EXPECT_EQ(ok.load(), kCalls);
}

// Each serving thread decides at most kCallsPerThread calls at once: the calls beyond wait
// in gRPC, and are decided, in full, once slots free.
TEST_F(GrpcServerTest, CallsBeyondTheSlotsWaitForOne) {
  HeldEngine engine;
  StartOn(engine, 1);
  constexpr int kSlots = GrpcServer::kCallsPerThread;
  constexpr int kCalls = kSlots + 20;
  std::mutex mutex;
  std::condition_variable answered;
  int ok = 0, failed = 0;
  struct Pending {
    grpc::ClientContext context;
    pb::RateLimitRequest request = MakeRequest("held");
    pb::RateLimitResponse response;
  };
  std::vector<std::unique_ptr<Pending>> pending;
  for (int i = 0; i < kCalls; ++i) {
    auto& call = *pending.emplace_back(std::make_unique<Pending>());
    call.context.set_deadline(std::chrono::system_clock::now() + 3 * kGuard);
    rls_->async()->ShouldRateLimit(&call.context, &call.request, &call.response,
                                   [&](grpc::Status status) {
                                     std::lock_guard lock(mutex);
                                     ++(status.ok() ? ok : failed);
                                     answered.notify_all();
                                   });
  }
  EXPECT_TRUE(engine.WaitHeld(kSlots, kGuard));
  engine.Release();  // the first kSlots answered; their slots take the rest
  EXPECT_TRUE(engine.WaitHeld(kCalls - kSlots, kGuard));
  engine.Release();
  std::unique_lock lock(mutex);
  const auto all_back = [&] { return ok + failed == kCalls; };
  if (!answered.wait_for(lock, kGuard, all_back)) {
    // A failure above: the calls still out must end before what they point at goes.
    for (auto& call : pending) call->context.TryCancel();
    answered.wait_for(lock, kGuard, all_back);
  }
  EXPECT_EQ(ok, kCalls);
  EXPECT_EQ(engine.max_held(), static_cast<std::size_t>(kSlots));
}

TEST_F(GrpcServerTest, HealthWatchIsUnimplementedAndSaysSo) {
  ScriptedEngine& engine = scripted_;
  StartOn(engine);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kGuard);
  HealthCheckRequest request;
  auto stream = health_->Watch(&context, request);
  HealthCheckResponse response;
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("Check"));
}

TEST_F(GrpcServerTest, HealthServesBothNamesAndFollowsReadiness) {
  ScriptedEngine& engine = scripted_;
  StartOn(engine);
  EXPECT_EQ(HealthOf(""), HealthCheckResponse::SERVING);
  EXPECT_EQ(HealthOf("ratelimit"), HealthCheckResponse::SERVING);
  EXPECT_EQ(HealthOf("something.else"), HealthCheckResponse::SERVICE_UNKNOWN);
  server_->SetServing(false);
  EXPECT_EQ(HealthOf(""), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(HealthOf("ratelimit"), HealthCheckResponse::NOT_SERVING);
  server_->SetServing(true);
  EXPECT_EQ(HealthOf("ratelimit"), HealthCheckResponse::SERVING);
}

// Shutdown lets a call in flight finish with its answer, then refuses new calls.
TEST_F(GrpcServerTest, ShutdownFinishesCallsInFlight) {
  HeldEngine engine;
  StartOn(engine);
  grpc::Status in_flight_status;
  pb::RateLimitResponse in_flight;
  std::thread client([&] { in_flight_status = Call(MakeRequest("held"), in_flight, kGuard); });
  ASSERT_TRUE(engine.WaitHeld(1, kGuard));
  std::thread stopping([&] { server_->Shutdown(kGuard); });
  // The shutdown waits for the held call: answer it, then both end.
  engine.Release();
  stopping.join();
  client.join();
  EXPECT_TRUE(in_flight_status.ok()) << in_flight_status.error_message();
  EXPECT_EQ(in_flight.overall_code(), pb::RateLimitResponse::OK);
  pb::RateLimitResponse after;
  EXPECT_FALSE(Call(MakeRequest("late"), after, 1s).ok());
}

TEST(GrpcServerStart, AnAddressInUseIsAnError) {
  ScriptedEngine engine;
  GrpcServer first(engine, GrpcOptions{"127.0.0.1", 0});
  ASSERT_TRUE(first.Start().ok());
  GrpcServer second(engine, GrpcOptions{"127.0.0.1", first.port()});
  const absl::Status status = second.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("cannot listen for gRPC"));
}

// ---- POST /json and GET /healthcheck on the HTTP service ----

class RlsHttpTest : public ::testing::Test {
 protected:
  RlsHttpTest()
      : service_(std::make_shared<MemoryStore>(), std::make_shared<const ServerConfig>()) {
    service_.AttachRls(&engine_);
  }
  Response Call(http::verb method, std::string target, std::string body = "") {
    Request request(method, target, 11);
    request.body() = std::move(body);
    request.prepare_payload();
    std::optional<Response> response;
    service_.Handle(request, boost::asio::ip::make_address("127.0.0.1"),
                    [&](Response r) { response = std::move(r); });
    EXPECT_TRUE(response.has_value());  // the scripted engine answers inline
    return response.value_or(Response{});
  }

  ScriptedEngine engine_;
  Service service_;
};

TEST_F(RlsHttpTest, HealthcheckAnswersOk) {
  const Response r = Call(http::verb::get, "/healthcheck");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "OK");
}

// The `ratelimit` command's health (draining after SIGTERM...): 500 with an empty body, as
// upstream's; any method, as upstream's router.
TEST_F(RlsHttpTest, HealthcheckAnswers500WhileUnhealthy) {
  bool healthy = true;
  service_.SetHealthCheck([&] { return healthy; });
  EXPECT_EQ(Call(http::verb::post, "/healthcheck").status, 200);
  healthy = false;
  const Response r = Call(http::verb::get, "/healthcheck");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "");
  healthy = true;
  EXPECT_EQ(Call(http::verb::get, "/healthcheck").body, "OK");
}

TEST_F(RlsHttpTest, JsonTakesAndAnswersProtobufJson) {
  const Response ok = Call(http::verb::post, "/json",
                           R"({"domain":"ok","descriptors":[{"entries":[{"key":"k","value":"v"}]}],
                               "hitsAddend":3})");
  ASSERT_EQ(ok.status, 200) << ok.body;
  const auto body = nlohmann::json::parse(ok.body);
  EXPECT_EQ(body["overallCode"], "OK");
  EXPECT_EQ(body["statuses"][0]["limitRemaining"], 97) << "hits_addend reached the engine";

  const Response denied = Call(http::verb::post, "/json",
                               R"({"domain":"deny","descriptors":[{"entries":[{"key":"k"}]}]})");
  EXPECT_EQ(denied.status, 429) << denied.body;
  EXPECT_EQ(nlohmann::json::parse(denied.body)["overallCode"], "OVER_LIMIT");
}

TEST_F(RlsHttpTest, JsonRefusesWhatIsNotARateLimitRequest) {
  EXPECT_EQ(Call(http::verb::post, "/json", "not json").status, 400);
  EXPECT_EQ(Call(http::verb::post, "/json", R"({"domain":"ok","nope":1})").status, 400)
      << "unknown fields are refused, as upstream's protojson does";
  EXPECT_EQ(Call(http::verb::post, "/json", R"({"domain":"error:3"})").status, 400);
  EXPECT_EQ(Call(http::verb::post, "/json", R"({"domain":"error:14"})").status, 503);
  EXPECT_EQ(engine_.calls.load(), 2) << "bad bodies never reach the engine";
}

// Issue 39: protobuf's JSON parser kept the last of two same fields ("domain":"a",
// "domain":"b" meant b), its JSON and proto names alike; a duplicate is refused by name.
TEST_F(RlsHttpTest, JsonRefusesAFieldGivenTwice) {
  const auto refused = [&](const std::string& body) {
    const Response r = Call(http::verb::post, "/json", body);
    EXPECT_EQ(r.status, 400) << body;
    return nlohmann::json::parse(r.body)["message"].get<std::string>();
  };
  EXPECT_EQ(refused(R"({"domain":"ok","domain":"deny","descriptors":[{"entries":[{"key":"k"}]}]})"),
            "not a RateLimitRequest: field \"domain\" given twice");
  EXPECT_EQ(refused(R"({"domain":"ok","hitsAddend":0,"hits_addend":5,
                        "descriptors":[{"entries":[{"key":"k"}]}]})"),
            "not a RateLimitRequest: field \"hits_addend\" given twice");
  EXPECT_EQ(refused(R"({"domain":"ok","descriptors":[{"entries":[{"key":"k"}]},
                        {"entries":[{"key":"k","value":"a","value":"b"}]}]})"),
            "not a RateLimitRequest: descriptors[1].entries[0]: field \"value\" given twice");
  EXPECT_EQ(engine_.calls.load(), 0) << "none reached the engine";
}

TEST(RlsHttpWithoutEngine, JsonIsNotFound) {
  Service service(std::make_shared<MemoryStore>(), std::make_shared<const ServerConfig>());
  Request request(http::verb::post, "/json", 11);
  std::optional<Response> response;
  service.Handle(request, boost::asio::ip::make_address("127.0.0.1"),
                 [&](Response r) { response = std::move(r); });
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->status, 404);
}

// ---- upstream's Redis environment variables ----

absl::StatusOr<std::optional<std::string>> UrlFrom(std::map<std::string, std::string> env) {
  return StoreUrlFromUpstreamRedisEnv([&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(UpstreamRedisEnv, MapsOntoOurStoreUrl) {
  EXPECT_EQ(UrlFrom({}).value(), std::nullopt);
  EXPECT_EQ(UrlFrom({{"REDIS_URL", "redis://h:1?timeout=5ms"}}).value(), "redis://h:1?timeout=5ms")
      << "a URL with a scheme is floodgate's own";
  EXPECT_EQ(UrlFrom({{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "redis:6379"}}).value(),
            "redis://redis:6379");
  EXPECT_EQ(UrlFrom({{"REDIS_URL", "10.0.0.1:6379"},
                     {"REDIS_TYPE", "SINGLE"},
                     {"REDIS_AUTH", "user:p@ss"},
                     {"REDIS_POOL_SIZE", "10"}})
                .value(),
            "redis://user:p%40ss@10.0.0.1:6379?connections=10");
  EXPECT_EQ(UrlFrom({{"REDIS_URL", "a:1,b:2"},
                     {"REDIS_TYPE", "cluster"},
                     {"REDIS_TLS", "true"},
                     {"REDIS_AUTH", "secret"},
                     {"REDIS_POOL_SIZE", "500"},
                     {"REDIS_TLS_CACERT", "/etc/ca.pem"}})
                .value(),
            "redis-cluster://secret@a:1,b:2?tls=1&connections=64&ca=/etc/ca.pem");
  EXPECT_EQ(UrlFrom({{"REDIS_URL", "h:6380"}, {"REDIS_TLS", "true"}}).value(), "rediss://h:6380");
}

// REDIS_TYPE=sentinel: REDIS_URL is the master's name, then the sentinels; they and the
// primary are dialled over TCP, whatever the (default unix) socket type says.
TEST(UpstreamRedisEnv, MapsSentinelOntoRedisSentinel) {
  auto url = UrlFrom({{"REDIS_URL", "my master,s1:26379,s2:26380"},
                      {"REDIS_TYPE", "SENTINEL"},
                      {"REDIS_AUTH", "p@ss"},
                      {"REDIS_POOL_SIZE", "8"}})
                 .value();
  ASSERT_TRUE(url.has_value());
  EXPECT_EQ(*url, "redis-sentinel://p%40ss@s1:26379,s2:26380/my%20master?connections=8");
  const auto options = RedisStoreOptions::FromUrl(*url);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->sentinel);
  EXPECT_EQ(options->sentinel_master, "my master");
  EXPECT_EQ(options->password, "p@ss");
  ASSERT_EQ(options->seeds.size(), 2u);
  EXPECT_EQ(options->seeds[1], (RedisEndpoint{"s2", 26380}));
  EXPECT_EQ(UrlFrom({{"REDIS_URL", "fg,s1:26379"},
                     {"REDIS_TYPE", "sentinel"},
                     {"REDIS_SOCKET_TYPE", "unix"},
                     {"REDIS_TLS", "true"}})
                .value(),
            "rediss-sentinel://s1:26379/fg");
}

// Upstream's default REDIS_SOCKET_TYPE is unix, with REDIS_URL the socket's path; a
// cluster is dialled over TCP whatever the socket type says, as upstream does.
TEST(UpstreamRedisEnv, MapsAUnixSocketOntoRedisPlusUnix) {
  EXPECT_EQ(UrlFrom({{"REDIS_URL", "/var/run/nutcracker/ratelimit.sock"}}).value(),
            "redis+unix:///var/run/nutcracker/ratelimit.sock");
  const auto url = UrlFrom({{"REDIS_SOCKET_TYPE", "unix"},
                            {"REDIS_URL", "/run/my redis/r%.sock"},
                            {"REDIS_AUTH", "user:p@ss"},
                            {"REDIS_POOL_SIZE", "4"}})
                       .value();
  ASSERT_TRUE(url.has_value());
  EXPECT_EQ(*url, "redis+unix://user:p%40ss@/run/my%20redis/r%25.sock?connections=4");
  const auto options = RedisStoreOptions::FromUrl(*url);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->unix_socket, "/run/my redis/r%.sock");
  EXPECT_EQ(options->password, "p@ss");
  EXPECT_EQ(
      UrlFrom({{"REDIS_SOCKET_TYPE", "UNIX"}, {"REDIS_URL", "a:1,b:2"}, {"REDIS_TYPE", "cluster"}})
          .value(),
      "redis-cluster://a:1,b:2");
}

TEST(UpstreamRedisEnv, RefusesWhatCannotMap) {
  const auto refused = [](std::map<std::string, std::string> env, const std::string& why) {
    const auto url = UrlFrom(std::move(env));
    ASSERT_FALSE(url.ok());
    EXPECT_THAT(std::string(url.status().message()), ::testing::HasSubstr(why));
  };
  refused({{"REDIS_URL", "/var/run/nutcracker/ratelimit.sock"}, {"REDIS_TLS", "true"}},
          "Redis serves TLS on TCP only");
  refused({{"REDIS_URL", "/r.sock"}, {"REDIS_TYPE", "cluster"}}, "a cluster is reached over TCP");
  // Booleans as upstream reads them: "yes" is no boolean to Go's strconv.ParseBool.
  refused({{"REDIS_URL", "h:1"}, {"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_TLS", "yes"}},
          "REDIS_TLS=\"yes\"");
  refused({{"REDIS_URL", "h:1"}, {"REDIS_SOCKET_TYPE", "unix"}}, "the socket's absolute path");
  refused({{"REDIS_URL", "h:1"}, {"REDIS_SOCKET_TYPE", "udp"}},
          "REDIS_SOCKET_TYPE must be tcp or unix");
  refused({{"REDIS_URL", "h:1"}, {"REDIS_TYPE", "ring"}},
          "REDIS_TYPE must be SINGLE, CLUSTER or SENTINEL");
  refused({{"REDIS_URL", "h:1"}, {"REDIS_TYPE", "SENTINEL"}},
          "the master's name, then the sentinels");
  refused({{"REDIS_URL", ",h:1"}, {"REDIS_TYPE", "sentinel"}},
          "the master's name, then the sentinels");
  refused({{"REDIS_URL", "a:1,b:2"}}, "set REDIS_TYPE=cluster");
  refused({{"REDIS_URL", "h:1"}, {"REDIS_POOL_SIZE", "0"}}, "REDIS_POOL_SIZE");
  refused({{"REDIS_URL", "h:1"}, {"REDIS_TLS_CACERT", "/ca.pem"}}, "needs REDIS_TLS=true");
}

TEST(RlsConfigSection, ParsesGrpcListenAndRls) {
  auto config = ParseConfig(R"(
grpc_listen: 127.0.0.1:9081
rls:
  runtime_root: /srv/runtime_data/current
  runtime_subdirectory: ratelimit
  ignore_dotfiles: true
  on_error: error
)",
                            "f.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->grpc_listen, "127.0.0.1:9081");
  EXPECT_EQ(config->rls.runtime_root, "/srv/runtime_data/current");
  EXPECT_EQ(config->rls.runtime_subdirectory, "ratelimit");
  EXPECT_TRUE(config->rls.ignore_dotfiles);
  EXPECT_TRUE(config->rls.unavailable_on_store_error);

  const auto bad = ParseConfig("rls:\n  on_error: fail_open\n", "f.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("f.yaml:2: rls.on_error"));
  EXPECT_FALSE(ParseConfig("grpc_listen: nope\n", "f.yaml").ok());
}

}  // namespace
}  // namespace floodgate::server::rls

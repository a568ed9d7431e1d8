// The RLS engine on real redis-servers (single and Cluster).
//
// Answers arrive on the store's I/O thread, several descriptors of one request decided
// concurrently, the server's clock, all_or_nothing across cluster slots, and a killed Redis
// answered by on_error without waiting.

#include <gtest/gtest.h>

#include <future>
#include <string>

#include "redis_server.h"
#include "rls_request.h"
#include "server/rls/config.h"
#include "server/rls/rls_engine.h"

namespace floodgate::server::rls {
namespace {

using Response = pb::RateLimitResponse;
using floodgate::testing::RedisCluster;
using floodgate::testing::RedisServer;

// YEAR windows: the server's clock decides, and a window boundary during a test run is
// once a year.
constexpr const char* kDescriptors = R"(descriptors:
  - key: big
    rate_limit: {unit: year, requests_per_unit: 10}
  - key: small
    rate_limit: {unit: year, requests_per_unit: 1}
)";

// Two descriptors of `user`: "big" with its own hits_addend, and "small".
pb::RateLimitRequest Request(const std::string& domain, const std::string& user,
                             std::uint64_t big_hits = 1) {
  return floodgate::testing::RlsRequest(domain, {{{{"big", user}}, big_hits}, {{{"small", user}}}});
}

// "big" of `user` with hits_addend 0: where it stands, nothing counted.
pb::RateLimitRequest Peek(const std::string& domain, const std::string& user) {
  return floodgate::testing::RlsRequest(domain, {{{{"big", user}}, 0}});
}

class Asker {
 public:
  Asker(Store& store, RlsSettings settings = {}) {
    auto config = ParseRlsConfig(
        {{"d.yaml", std::string("domain: d\n") + kDescriptors},
         {"a.yaml", std::string("domain: a\nall_or_nothing: true\n") + kDescriptors}});
    EXPECT_TRUE(config.ok()) << config.status();
    engine_ = std::make_unique<RlsEngine>(store, std::move(settings),
                                          config.ok() ? *config : nullptr, metrics_);
  }
  // Waits (bounded) for the answer from the store's thread.
  absl::StatusOr<Response> Ask(const pb::RateLimitRequest& request) {
    auto response = std::make_shared<Response>();
    auto answered = std::make_shared<std::promise<absl::Status>>();
    engine_->ShouldRateLimit(request, response.get(),
                             [response, answered](absl::Status s) { answered->set_value(s); });
    auto future = answered->get_future();
    if (future.wait_for(floodgate::testing::kHangGuard) != std::future_status::ready) {
      return absl::DeadlineExceededError("no answer: a hang");
    }
    const absl::Status status = future.get();
    if (!status.ok()) return status;
    return *response;
  }
  RlsMetrics& metrics() { return metrics_; }

 private:
  RlsMetrics metrics_;
  std::unique_ptr<RlsEngine> engine_;
};

std::uint32_t RemainingBig(Asker& asker, const std::string& domain, const std::string& user) {
  auto peek = asker.Ask(Peek(domain, user));
  EXPECT_TRUE(peek.ok()) << peek.status();
  return peek.ok() ? peek->statuses(0).limit_remaining() : 0;
}

void CheckPollution(Store& store) {
  Asker asker(store);
  // Default: the denied request still spends the big limit (upstream's behaviour).
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(asker.Ask(Request("d", "u")).ok());
  auto denied = asker.Ask(Request("d", "u"));
  ASSERT_TRUE(denied.ok()) << denied.status();
  EXPECT_EQ(denied->overall_code(), Response::OVER_LIMIT);
  EXPECT_EQ(denied->statuses(0).code(), Response::OK);
  EXPECT_EQ(denied->statuses(1).code(), Response::OVER_LIMIT);
  EXPECT_EQ(RemainingBig(asker, "d", "u"), 7u);
  // all_or_nothing: denials spend nothing.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(asker.Ask(Request("a", "u")).ok());
  EXPECT_EQ(RemainingBig(asker, "a", "u"), 9u);
}

TEST(RlsRedisTest, DecisionsOnOneRedis) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto store = floodgate::testing::OpenRedis(server->url("timeout=60s"));
  ASSERT_NE(store, nullptr);
  CheckPollution(*store);
  store->Close();
}

TEST(RlsRedisTest, AllOrNothingAcrossClusterSlots) {
  RedisCluster* cluster = RedisCluster::Shared();
  ASSERT_NE(cluster, nullptr);
  auto store = floodgate::testing::OpenRedis(cluster->url("timeout=60s"));
  ASSERT_NE(store, nullptr);
  CheckPollution(*store);
  store->Close();
}

// Killed, Redis is answered for by on_error at once: the connection is gone, so no call
// waits out the timeout (a guard here, which a call that waited would count).
TEST(RlsRedisTest, KilledRedisIsAnsweredByOnErrorWithoutWaiting) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto store = floodgate::testing::OpenRedis(server->url("timeout=60s&on_error=fail_closed"));
  ASSERT_NE(store, nullptr);
  {
    Asker asker(*store);
    ASSERT_EQ(asker.Ask(Request("d", "k"))->overall_code(), Response::OK);
    server->Kill();
    for (int i = 0; i < 3; ++i) {
      auto answer = asker.Ask(Request("d", "k"));
      ASSERT_TRUE(answer.ok()) << answer.status();
      EXPECT_EQ(answer->overall_code(), Response::OVER_LIMIT);  // fail_closed
    }
    EXPECT_GE(asker.metrics().Get("d.big", RlsMetrics::kDegraded), 3u);
    EXPECT_EQ(store->redis_stats().timeouts, 0u) << store->redis_stats().last_error;

    RlsSettings unavailable;
    unavailable.unavailable_on_store_error = true;
    Asker erroring(*store, unavailable);
    auto answer = erroring.Ask(Request("d", "k"));
    EXPECT_TRUE(absl::IsUnavailable(answer.status())) << answer.status();
  }
  store->Close();
}

}  // namespace
}  // namespace floodgate::server::rls

// `floodgate serve` as a process on a Redis store that is not there yet.
//
// It must start at once, answer by on_error, say why in its log (at most once a second), and switch
// to Redis once Redis answers, standalone and on a cluster.
#include <fcntl.h>
#include <floodgate/policy.h>
#include <floodgate/reservation.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "redis_server.h"
#include "serve_process.h"

namespace floodgate::testing {
namespace {

namespace fs = std::filesystem;
namespace beast = boost::beast;
namespace asio = boost::asio;
using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

// POST /v1/check for `key` under `policy`: the Decision JSON, or null on any failure.
nlohmann::json Check(int port, const std::string& key, const std::string& policy) {
  const Answer a = Http(port, beast::http::verb::post, "/v1/check",
                        fmt::format(R"({{"key":"{}","policy":"{}"}})", key, policy));
  if (a.status != 200) return nullptr;
  return nlohmann::json::parse(a.body);
}

bool Degraded(const nlohmann::json& decision) { return decision.value("degraded", false); }

// Polls (bounded by kHangGuard) until /readyz says the store answers: serve listens before
// it has connected to Redis (lazy_connect), and a decision until then is on_error's.
bool WaitReady(int port) {
  const auto deadline = Steady::now() + kHangGuard;
  while (Steady::now() < deadline) {
    if (Http(port, beast::http::verb::get, "/readyz").status == 200) return true;
    std::this_thread::sleep_for(milliseconds(10));  // polling readiness
  }
  return false;
}

// Decides on 12 keys (spread over a cluster's primaries) until a round of them all comes
// from Redis (none degraded), for at most `limit` (a guard): how long that took, or
// nullopt.
std::optional<Steady::duration> TimeUntilRedisDecides(int port, Steady::duration limit) {
  const auto begin = Steady::now();
  while (Steady::now() - begin < limit) {
    bool all = true;
    for (int i = 0; i < 12 && all; ++i) {
      const nlohmann::json d = Check(port, fmt::format("probe{}", i), "fixed_window:100000/1h");
      all = !d.is_null() && !Degraded(d);
    }
    if (all) return Steady::now() - begin;
    std::this_thread::sleep_for(milliseconds(5));  // pacing the probe, not synchronisation
  }
  return std::nullopt;
}

// While no Redis is there: serve listens, /readyz says 503, every decision is the
// on_error answer (fail_closed: denied, degraded) given because Redis is unreachable, not
// by waiting out the store's timeout (a guard in these tests: none may fire), and the log
// names the reason (`why`) once a second at most.
void ExpectServingWithoutRedis(ServeProcess& serve, int http_port, const std::string& why) {
  ASSERT_TRUE(serve.WaitListening(http_port, kHangGuard)) << serve.Log();
  EXPECT_EQ(Http(http_port, beast::http::verb::get, "/readyz").status, 503);
  for (int i = 0; i < 10; ++i) {
    const Answer a = Http(http_port, beast::http::verb::post, "/v1/check",
                          R"({"key":"down","policy":"fixed_window:5/1h"})");
    ASSERT_EQ(a.status, 200) << serve.Log();
    const auto d = nlohmann::json::parse(a.body);
    EXPECT_TRUE(Degraded(d)) << a.body;
    EXPECT_FALSE(d["allowed"].get<bool>()) << a.body;
  }
  EXPECT_THAT(Http(http_port, beast::http::verb::get, "/metrics").body,
              ::testing::HasSubstr("\nfloodgate_store_timeouts_total 0\n"));
  // The reason, logged at most once a second: wait (bounded) for two reports, then the
  // count may not exceed the seconds elapsed (since the start, measured after the count)
  // plus one.
  serve.WaitLogLines(why, 2, kHangGuard);
  const int reports = serve.CountLogLines(why);
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(Steady::now() - serve.started()).count();
  EXPECT_GE(reports, 2) << serve.Log();
  EXPECT_LE(reports, seconds + 1) << serve.Log();
}

// Decisions from Redis from now on, and exact: 5 of 8 under fixed_window:5/1h.
void ExpectExactFromRedis(int http_port, const std::string& key) {
  for (int i = 0; i < 8; ++i) {
    const nlohmann::json d = Check(http_port, key, "fixed_window:5/1h");
    ASSERT_FALSE(d.is_null());
    EXPECT_FALSE(Degraded(d)) << d.dump();
    EXPECT_EQ(d["allowed"].get<bool>(), i < 5) << key << " #" << i << ": " << d.dump();
  }
}

// How soon serve switches is printed, not asserted (the reconnect backoff is capped at
// 500 ms; a loaded machine adds what it adds).
TEST(ServeWithoutRedis, StartsAnswersByOnErrorThenSwitchesOnceRedisAnswers) {
  const int redis_port = FreeLoopbackPort();
  const int http_port = FreeLoopbackPort();
  ServeProcess serve(
      {"--listen", fmt::format("127.0.0.1:{}", http_port), "--store",
       fmt::format("redis://127.0.0.1:{}?on_error=fail_closed&timeout=60s", redis_port)});
  ExpectServingWithoutRedis(
      serve, http_port,
      fmt::format("redis unreachable at 127.0.0.1:{}: connection refused; decisions are "
                  "answered by on_error=fail_closed",
                  redis_port));

  auto redis = RedisServer::Start({}, redis_port);  // returns once it answers PING
  ASSERT_NE(redis, nullptr);
  const auto took = TimeUntilRedisDecides(http_port, kHangGuard);
  ASSERT_TRUE(took.has_value()) << serve.Log();
  std::printf("serve decided from Redis %lld ms after it answered\n",
              static_cast<long long>(std::chrono::duration_cast<milliseconds>(*took).count()));
  ExpectExactFromRedis(http_port, "exact");
  EXPECT_EQ(redis->Cli({"EXISTS", "fg:fw:exact"}), "1\n");
  EXPECT_EQ(Http(http_port, beast::http::verb::get, "/readyz").status, 200);
  // Said once.
  EXPECT_TRUE(serve.WaitLogLines("answers: decisions go to it again", 1, kHangGuard))
      << serve.Log();
  EXPECT_EQ(serve.CountLogLines("answers: decisions go to it again"), 1) << serve.Log();
}

TEST(ServeWithoutRedis, TheSameWithAClusterWhoseSeedsAreAllDown) {
  // The seeds' ports are picked before serve starts and taken by the nodes only after it
  // has served without them; another test's server can take one meanwhile. Then the round
  // starts again on fresh ports (bounded: 3 rounds), rather than judging serve on a node
  // that could not start.
  std::optional<ServeProcess> serve;
  int http_port = 0;
  std::vector<std::unique_ptr<RedisServer>> nodes;
  std::string create;
  for (int round = 0; round < 3 && nodes.empty(); ++round) {
    std::vector<int> ports;
    while (ports.size() < 3) {
      const int port = FreeClusterNodePort();
      ASSERT_NE(port, 0);
      if (std::find(ports.begin(), ports.end(), port) == ports.end()) ports.push_back(port);
    }
    http_port = FreeLoopbackPort();
    const std::string seeds =
        fmt::format("127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}", ports[0], ports[1], ports[2]);
    serve.emplace(std::vector<std::string>{
        "--listen", fmt::format("127.0.0.1:{}", http_port), "--store",
        fmt::format("redis-cluster://{}?on_error=fail_closed&timeout=60s", seeds)});
    ExpectServingWithoutRedis(*serve, http_port,
                              "no slot map yet (redis unreachable at 127.0.0.1:");
    create = "redis-cli --cluster create";
    for (int port : ports) {
      nodes.push_back(RedisServer::TryStartClusterNode(port));
      create += fmt::format(" 127.0.0.1:{}", port);
      if (nodes.back() == nullptr) {
        std::printf("round %d: port %d was taken before its node started; again\n", round, port);
        nodes.clear();
        break;
      }
    }
  }
  ASSERT_FALSE(nodes.empty()) << "a seed's port was taken in each of 3 rounds";
  // Returns once every node agrees on the slot map: the cluster answers.
  auto cluster = RedisCluster::Create(std::move(nodes), create + " --cluster-yes");
  ASSERT_NE(cluster, nullptr);
  const auto took = TimeUntilRedisDecides(http_port, kHangGuard);
  ASSERT_TRUE(took.has_value()) << serve->Log();
  std::printf("serve decided from the cluster %lld ms after it formed\n",
              static_cast<long long>(std::chrono::duration_cast<milliseconds>(*took).count()));
  // Keys on every primary (their slots spread over the three), each exact.
  for (int i = 0; i < 6; ++i) ExpectExactFromRedis(http_port, fmt::format("exact{}", i));
  EXPECT_EQ(Http(http_port, beast::http::verb::get, "/readyz").status, 200);
}

// A denial the store cached for one item answers the request without a round trip; the
// other item was not asked, so /v1/check says so rather than showing a decision for it.
TEST(ServeOnRedis, ACachedDenialReportsTheOtherItemsAsNotConsulted) {
  auto redis = RedisServer::Start({});
  ASSERT_NE(redis, nullptr);
  const int http_port = FreeLoopbackPort();
  ServeProcess serve(
      {"--listen", fmt::format("127.0.0.1:{}", http_port), "--store",
       fmt::format("redis://127.0.0.1:{}?denial_cache=1ms&timeout=60s", redis->port())});
  ASSERT_TRUE(serve.WaitListening(http_port, kHangGuard)) << serve.Log();
  ASSERT_TRUE(WaitReady(http_port)) << serve.Log();
  const std::string body = R"({"items":[{"key":"tight","policy":"fixed_window:1/1h"},)"
                           R"({"key":"loose","policy":"fixed_window:100/1h"}]})";
  const auto items = [&] {
    const Answer a = Http(http_port, beast::http::verb::post, "/v1/check", body);
    EXPECT_EQ(a.status, 200) << a.body;
    return nlohmann::json::parse(a.body);
  };
  nlohmann::json first = items();
  ASSERT_TRUE(first["allowed"].get<bool>()) << first.dump();
  EXPECT_EQ(first["items"][1]["consulted"], true);
  EXPECT_EQ(first["items"][1]["remaining"], 99);
  nlohmann::json second = items();  // the store denies "tight" and caches that for 1 h
  ASSERT_FALSE(second["allowed"].get<bool>()) << second.dump();
  EXPECT_EQ(second["items"][1]["consulted"], true);
  nlohmann::json third = items();
  ASSERT_FALSE(third["allowed"].get<bool>()) << third.dump();
  EXPECT_EQ(third["denied_by"], nlohmann::json::array({"items[0]"})) << third.dump();
  EXPECT_EQ(third["items"][0]["consulted"], true) << third.dump();
  EXPECT_EQ(third["items"][1], (nlohmann::json{{"name", "items[1]"}, {"consulted", false}}))
      << third.dump();
  // Only the first, allowed request spent "loose": this one leaves 98 of 100.
  EXPECT_EQ(Check(http_port, "loose", "fixed_window:100/1h")["remaining"], 98);
}

// docs/reservations.md through the service on Redis: reserve and settle answer from
// Redis, a settle refunds exactly once; with Redis gone, a reserve is answered by on_error
// (degraded, no id) and a settle is a 503, never an on_error guess.
TEST(ServeOnRedis, ReserveAndSettleOverHttp) {
  auto redis = RedisServer::Start({});
  ASSERT_NE(redis, nullptr);
  const int http_port = FreeLoopbackPort();
  ServeProcess serve({"--listen", fmt::format("127.0.0.1:{}", http_port), "--store",
                      fmt::format("redis://127.0.0.1:{}?timeout=60s", redis->port())});
  ASSERT_TRUE(serve.WaitListening(http_port, kHangGuard)) << serve.Log();
  ASSERT_TRUE(WaitReady(http_port)) << serve.Log();
  const auto post = [&](const char* path, const std::string& body) {
    return Http(http_port, beast::http::verb::post, path, body);
  };
  Answer a = post("/v1/reserve", R"({"key":"llm","policy":"fixed_window:1000/1h","estimate":600})");
  ASSERT_EQ(a.status, 200) << a.body << serve.Log();
  nlohmann::json reserved = nlohmann::json::parse(a.body);
  ASSERT_TRUE(reserved["allowed"].get<bool>()) << a.body;
  EXPECT_FALSE(Degraded(reserved));
  EXPECT_EQ(reserved["remaining"], 400);
  const std::string settle = fmt::format(R"({{"reservation":"{}","actual":150}})",
                                         reserved["reservation"].get<std::string>());
  a = post("/v1/settle", settle);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(nlohmann::json::parse(a.body)["remaining"], 850);
  EXPECT_EQ(post("/v1/settle", settle).status, 404);
  EXPECT_EQ(Check(http_port, "llm", "fixed_window:1000/1h")["remaining"], 849);

  a = post("/v1/reserve", R"({"key":"llm","policy":"fixed_window:1000/1h","estimate":10})");
  const std::string pending =
      fmt::format(R"({{"reservation":"{}","actual":1}})",
                  nlohmann::json::parse(a.body)["reservation"].get<std::string>());
  redis.reset();  // stopped, by its PID
  a = post("/v1/reserve", R"({"key":"llm","policy":"fixed_window:1000/1h","estimate":10})");
  ASSERT_EQ(a.status, 200) << a.body;
  const nlohmann::json degraded = nlohmann::json::parse(a.body);
  EXPECT_TRUE(Degraded(degraded)) << a.body;
  EXPECT_FALSE(degraded.contains("reservation")) << a.body;
  a = post("/v1/settle", pending);
  EXPECT_EQ(a.status, 503) << a.body;
  EXPECT_THAT(a.body, ::testing::HasSubstr("the settle's outcome is unknown")) << a.body;
}

// A Redis lease's id carries its key (docs/leases.md): for the longest keys, 16 ids in one
// X-RateLimit-Lease (the release hook's most) are 11.8 KiB of header, which the service
// reads whole, releasing every lease.
TEST(ServeOnRedis, TheReleaseHookFreesSixteenLeasesOnTheLongestKeys) {
  auto redis = RedisServer::Start({});
  ASSERT_NE(redis, nullptr);
  const int http_port = FreeLoopbackPort();
  ServeProcess serve({"--listen", fmt::format("127.0.0.1:{}", http_port), "--store",
                      fmt::format("redis://127.0.0.1:{}?timeout=60s", redis->port())});
  ASSERT_TRUE(serve.WaitListening(http_port, kHangGuard)) << serve.Log();
  ASSERT_TRUE(WaitReady(http_port)) << serve.Log();
  const auto acquire = [&](int i) {
    const std::string key = fmt::format("{:02}{}", i, std::string(kMaxKeyBytes - 2, 'k'));
    const Answer a = Http(http_port, beast::http::verb::post, "/v1/acquire",
                          fmt::format(R"({{"key":"{}","policy":"concurrency:1,lease=30s"}})", key));
    EXPECT_EQ(a.status, 200) << a.body;
    return a.status == 200 ? nlohmann::json::parse(a.body) : nlohmann::json();
  };
  std::string ids;
  for (int i = 0; i < 16; ++i) {
    const nlohmann::json lease = acquire(i);
    ASSERT_TRUE(lease.value("allowed", false)) << lease.dump();
    const std::string id = lease["lease"].get<std::string>();
    EXPECT_GT(id.size(), 683u);
    EXPECT_LE(id.size(), kMaxReservationIdBytes);
    ids += (i == 0 ? "" : ",") + id;
    EXPECT_FALSE(acquire(i).value("allowed", true)) << "concurrency:1 holds one lease";
  }
  ASSERT_GT(ids.size(), 8u * 1024);
  const Answer released =
      Http(http_port, beast::http::verb::post, "/v1/release", "", {{"X-RateLimit-Lease", ids}});
  EXPECT_EQ(released.status, 204) << released.body;
  for (int i = 0; i < 16; ++i) {
    EXPECT_TRUE(acquire(i).value("allowed", false)) << i << ": released, so admitted again";
  }
}

}  // namespace
}  // namespace floodgate::testing

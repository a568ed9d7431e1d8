// The Redis store when Redis fails: pauses, restarts, stalls, on_error, the breaker.
//
// Also the metrics, shutdown, close and lazy connect.
#include <floodgate/memory_store.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <future>
#include <sstream>
#include <thread>

#include "redis_test_fixture.h"
#include "server/config.h"
#include "server/http_server.h"
#include "server/service.h"
#include "store/redis/breaker.h"

namespace floodgate::testing {
namespace {

// Redis silent (script calls held): a decision is answered by on_error once its timeout
// fires, never by Redis's answer after the pause, and then the open breaker answers the
// rest without waiting. Here one failure opens the breaker, for the whole test: exactly
// one decision waits out the timeout, however slow the machine.
TEST_F(RedisTest, ASilentRedisIsAnsweredByTheTimeoutThenTheBreaker) {
  auto options = RedisStoreOptions::FromUrl(Url("timeout=2s&on_error=fail_closed"));
  ASSERT_TRUE(options.ok()) << options.status();
  options->breaker_failures = 1;
  options->breaker_open = std::chrono::minutes(10);
  auto opened = RedisStore::Open(*options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  RedisStore& store = **opened;
  const Policy policy = *Policy::Parse("gcra:1000/1s");
  ASSERT_FALSE(store.Decide({"k", policy, 1, std::nullopt})->degraded);
  PausedWrites paused({server_.get()});
  int degraded = 0;
  for (int i = 0; i < 20; ++i) {
    const Decision d = *store.Decide({fmt::format("k{}", i), policy, 1, std::nullopt});
    degraded += d.degraded;
    EXPECT_FALSE(d.allowed) << i;  // fail_closed
  }
  // All answered while Redis still held every call: none waited for Redis.
  EXPECT_EQ(degraded, 20);
  const RedisStats stats = store.redis_stats();
  EXPECT_EQ(stats.timeouts, 1u) << "the first by its timeout, the rest by the open breaker";
  EXPECT_EQ(stats.degraded, 20u);
  EXPECT_TRUE(stats.breaker_open);
}

// Issue 39: one client's burst, more than could be decided within the timeout, timed
// out in this process's own queue and opened the breaker for every other client. Here the
// queue is made deterministically: the store's I/O thread is held (in a decision's
// callback, which runs on it) until decisions queued behind it are past their deadline,
// while Redis has answered everything it was sent. Those timeouts are this process's, not
// Redis's: answered by on_error, counted apart, and the breaker stays closed.
TEST(RedisFailure, DecisionsThatTimeOutInOurOwnQueueDoNotOpenTheBreaker) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto options = RedisStoreOptions::FromUrl(
      server->url("timeout=2s&on_error=fail_closed&connections=1&denial_cache=0us"));
  ASSERT_TRUE(options.ok()) << options.status();
  options->breaker_open = std::chrono::seconds(60);  // once open, still open below
  auto opened = RedisStore::Open(*options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  RedisStore& store = **opened;
  const Policy policy = *Policy::Parse("gcra:1000000/1s");
  ASSERT_FALSE(store.Decide({"warm", policy, 1, std::nullopt})->degraded);

  constexpr int kQueued = 100;  // 20 times the breaker's threshold
  std::promise<void> holding;
  std::promise<Steady::time_point> queued;
  std::promise<void> held;
  store.DecideAsync({"holder", policy, 1, std::nullopt}, [&](absl::StatusOr<Decision>) {
    holding.set_value();
    // On the I/O thread: keep it until every decision below is past its deadline. The
    // wait is the point (a deadline must pass), not a stand-in for an event. The timeout
    // is 2 s so that the warm-up and the last decision, which Redis must answer, have a
    // loaded machine's slack.
    std::this_thread::sleep_until(queued.get_future().get() + milliseconds(2000 + 20));
    held.set_value();
  });
  holding.get_future().wait();
  std::atomic<int> answered{0}, degraded{0};
  std::promise<void> all;
  for (int i = 0; i < kQueued; ++i) {
    store.DecideAsync({fmt::format("queued{}", i), policy, 1, std::nullopt},
                      [&](absl::StatusOr<Decision> d) {
                        degraded += !d.ok() || d->degraded;
                        if (++answered == kQueued) all.set_value();
                      });
  }
  queued.set_value(Steady::now());
  ASSERT_EQ(all.get_future().wait_for(kHangGuard), std::future_status::ready);
  held.get_future().wait();
  const RedisStats stats = store.redis_stats();
  EXPECT_EQ(degraded.load(), kQueued);  // past their deadline: on_error answered them
  EXPECT_EQ(stats.timeouts, static_cast<std::uint64_t>(kQueued));
  EXPECT_EQ(stats.backlog_timeouts, static_cast<std::uint64_t>(kQueued));
  EXPECT_FALSE(stats.breaker_open);
  // The next client is answered by Redis, not by an open breaker.
  EXPECT_FALSE(store.Decide({"another client", policy, 1, std::nullopt})->degraded);
  store.Close();
}

// The other side: a Redis that answers nothing is still a failure, however many
// decisions wait in this process's queue behind the ones sent to it.
TEST(RedisFailure, ASilentRedisOpensTheBreakerUnderABurstToo) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto options = RedisStoreOptions::FromUrl(server->url("timeout=2s&on_error=fail_closed"));
  ASSERT_TRUE(options.ok()) << options.status();
  options->breaker_open = std::chrono::seconds(60);  // once open, still open below
  auto opened = RedisStore::Open(*options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto store = *std::move(opened);
  const Policy policy = *Policy::Parse("gcra:1000000/1s");
  ASSERT_FALSE(store->Decide({"warm", policy, 1, std::nullopt})->degraded);
  PausedWrites paused({server.get()});
  constexpr int kBurst = 2'000;
  std::atomic<int> answered{0};
  std::promise<void> all;
  for (int i = 0; i < kBurst; ++i) {
    store->DecideAsync({fmt::format("burst{}", i), policy, 1, std::nullopt},
                       [&](absl::StatusOr<Decision>) {
                         if (++answered == kBurst) all.set_value();
                       });
  }
  ASSERT_EQ(all.get_future().wait_for(kHangGuard), std::future_status::ready);
  const RedisStats stats = store->redis_stats();
  EXPECT_TRUE(stats.breaker_open);
  // The decisions sent to the paused Redis were charged to it: at least the breaker's
  // threshold of them (those only queued behind may count as the backlog's).
  EXPECT_GE(stats.timeouts - stats.backlog_timeouts, 5u);
  paused.End();
  store->Close();
}

// Redis killed: every decision meanwhile is on_error's, answered because the connection is
// gone (an error, not a timeout waited out); restarted, Redis answers again on a new
// connection. (How soon is the reconnect backoff's, capped at reconnect_max: the time is
// printed, not asserted; a loaded machine decides it as much as the store does.)
TEST(RedisFailure, RestartDegradesThenRecovers) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  // The timeout is a guard here: a decision that waited on the dead connection would count
  // a timeout.
  auto store = OpenRedis(server->url("timeout=60s&on_error=local"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:1000000/1h");
  ASSERT_FALSE(store->Decide({"k", policy, 1, std::nullopt})->degraded);

  server->Kill();
  for (int i = 0; i < 50; ++i) {
    const Decision d = *store->Decide({"k", policy, 1, std::nullopt});
    EXPECT_TRUE(d.degraded);
    EXPECT_TRUE(d.allowed);  // the local limiter decides, and has room
  }
  EXPECT_EQ(store->redis_stats().timeouts, 0u) << store->redis_stats().last_error;
  EXPECT_GE(store->redis_stats().errors, 1u);
  ASSERT_TRUE(server->Restart());
  const auto answered = TimeUntilRedisAnswers(*store, "k", policy, kHangGuard);
  ASSERT_TRUE(answered.has_value());
  std::printf("Redis answered again %lld ms after it was back\n",
              static_cast<long long>(std::chrono::duration_cast<milliseconds>(*answered).count()));
  EXPECT_GE(store->redis_stats().reconnects, 1u);
}

// A connection whose oldest call has waited past the stall limit (max(1 s, 20 x timeout))
// is taken for dead and replaced, while Redis is still silent: the store does not wait on
// it for good. Every answer meanwhile is on_error's.
TEST(RedisFailure, AConnectionThatStopsAnsweringIsReplaced) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto store = OpenRedis(server->url("timeout=20ms&connections=1"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("gcra:1000/1s");
  ASSERT_TRUE(TimeUntilRedisAnswers(*store, "k", policy, kHangGuard).has_value());
  const auto paused_at = Steady::now();  // every call below is sent after this
  PausedWrites paused({server.get()});
  // Decisions, one a millisecond (bounded by kHangGuard), until the store has replaced
  // the connection.
  int decided = 0;
  while (store->redis_stats().reconnects == 0 && Steady::now() - paused_at < kHangGuard) {
    EXPECT_TRUE(store->Decide({"k", policy, 1, std::nullopt})->degraded) << decided;
    ++decided;
    std::this_thread::sleep_for(milliseconds(1));  // pacing the load, not synchronisation
  }
  ASSERT_GE(store->redis_stats().reconnects, 1u) << "after " << decided << " decisions";
  EXPECT_GE(Steady::now() - paused_at, std::chrono::seconds(1)) << "not before the stall limit";
  paused.End();
  EXPECT_TRUE(TimeUntilRedisAnswers(*store, "k", policy, kHangGuard).has_value());
}

TEST(RedisFailure, EachOnErrorModeAnswersAsConfigured) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto open = OpenRedis(server->url("on_error=fail_open"));
  auto closed = OpenRedis(server->url("on_error=fail_closed"));
  auto local = OpenRedis(server->url("on_error=local"));
  ASSERT_TRUE(open && closed && local);
  server->Kill();
  const Policy policy = *Policy::Parse("fixed_window:2/1h");
  for (int i = 0; i < 3; ++i) {
    const Decision o = *open->Decide({"k", policy, 1, std::nullopt});
    EXPECT_TRUE(o.degraded && o.allowed);
    const Decision c = *closed->Decide({"k", policy, 1, std::nullopt});
    EXPECT_TRUE(c.degraded && !c.allowed);
    EXPECT_GT(c.retry_after.count(), 0);
    // The local limiter applies the same policy to the same key: 2 of 3 pass.
    const Decision l = *local->Decide({"k", policy, 1, std::nullopt});
    EXPECT_TRUE(l.degraded);
    EXPECT_EQ(l.allowed, i < 2) << i;
    EXPECT_EQ(l.remaining, i < 2 ? 1 - i : 0) << i;
  }
  EXPECT_EQ(local->redis_stats().degraded, 3u);
}

// floodgate's HTTP service on a Redis store, with one rule, `api`: requests for /api,
// one limit per client IP.
struct ServiceOnRedis {
  std::shared_ptr<RedisStore> store;
  std::unique_ptr<server::Service> service;
};
ServiceOnRedis StartService(RedisServer& redis, const std::string& options,
                            const std::string& policy) {
  ServiceOnRedis out;
  out.store = OpenRedis(redis.url(options));
  auto config = server::ParseConfig(
      fmt::format("rules:\n  - {{name: api, match: {{path_prefix: /api}}, identify: ip, "
                  "policy: '{}'}}\n",
                  policy),
      "t.yaml");
  if (out.store == nullptr || !config.ok()) return {};
  out.service = std::make_unique<server::Service>(
      out.store, std::make_shared<const server::ServerConfig>(*config));
  return out;
}

// What /metrics shows while Redis is down and on_error=local answers.
TEST(RedisFailure, MetricsShowDegradedAnswersErrorsAndTheLocalLimitersKeys) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  const ServiceOnRedis running =
      StartService(*server, "timeout=60s&on_error=local", "fixed_window:2/1h");
  ASSERT_NE(running.service, nullptr);
  server::Service& service = *running.service;
  const auto call = [&](const char* target, const char* uri) {
    server::Request request(boost::beast::http::verb::get, target, 11);
    if (uri != nullptr) request.set("X-Original-URI", uri);
    std::promise<server::Response> answer;
    service.Handle(request, boost::asio::ip::make_address("192.0.2.1"),
                   [&](server::Response r) { answer.set_value(std::move(r)); });
    return answer.get_future().get();
  };
  EXPECT_EQ(call("/v1/authz", "/api").result_int(), 204);  // from Redis
  // The log, captured: degraded answers are reported at most once a second, with a count.
  std::ostringstream log;
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  const auto began = Steady::now();
  server->Kill();
  // The local limiter applies the rule from scratch: 2 allowed, then denials.
  std::vector<int> statuses;
  for (int i = 0; i < 4; ++i) statuses.push_back(call("/v1/authz", "/api").result_int());
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(Steady::now() - began);
  spdlog::set_default_logger(previous);
  EXPECT_THAT(statuses, ::testing::ElementsAre(204, 204, 429, 429));
  std::istringstream lines(log.str());
  int reports = 0;
  for (std::string line; std::getline(lines, line);) {
    reports += line.find("answered by on_error since the last report") != std::string::npos;
  }
  EXPECT_GE(reports, 1) << log.str();
  EXPECT_LE(reports, 1 + seconds.count()) << log.str();
  const std::string text = call("/metrics", nullptr).body;
  EXPECT_THAT(text, HasSubstr("floodgate_decisions_total{rule=\"api\",result=\"allowed\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("floodgate_decisions_total{rule=\"api\",result=\"degraded\"} 4\n"));
  EXPECT_THAT(text, ::testing::ContainsRegex("floodgate_store_errors_total [1-9]"));
  EXPECT_THAT(text, HasSubstr("floodgate_memory_keys 1\n"));  // the local limiter's key
  EXPECT_THAT(
      text, ::testing::ContainsRegex("floodgate_build_info\\{version=\"[^\"]+\",store=\"redis://"));
}

// SIGTERM's graceful shutdown: a request the store is still answering (Redis silent) is
// answered before the server stops; nothing new is accepted meanwhile.
TEST(RedisFailure, ShutdownFinishesARequestTheStoreIsStillAnswering) {
  namespace beast = boost::beast;
  namespace asio = boost::asio;
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  const ServiceOnRedis running =
      StartService(*server, "timeout=60s&denial_cache=0us", "gcra:100/1s");
  ASSERT_NE(running.service, nullptr);
  RedisStore* store = running.store.get();
  server::HttpOptions options;
  options.port = 0;
  options.threads = 1;
  server::HttpServer http(*running.service, options);
  ASSERT_TRUE(http.Start().ok());

  const auto calls = store->redis_stats().calls;
  PausedWrites paused({server.get()});
  asio::io_context io;
  asio::ip::tcp::socket client(io);
  client.connect({asio::ip::make_address("127.0.0.1"), http.port()});
  beast::http::request<beast::http::empty_body> request(beast::http::verb::get, "/v1/authz", 11);
  request.set(beast::http::field::host, "localhost");
  request.set("X-Original-URI", "/api");
  beast::http::write(client, request);
  // In flight: the script call has gone to the silent Redis.
  const auto sent_by = Steady::now() + kHangGuard;
  while (store->redis_stats().calls == calls && Steady::now() < sent_by) std::this_thread::yield();
  ASSERT_GT(store->redis_stats().calls, calls);

  // The grace is a guard: the shutdown ends when the request does.
  auto shutdown = std::async(std::launch::async, [&] { http.Shutdown(std::chrono::minutes(2)); });
  // Until the server has stopped accepting (polled, bounded), then Redis answers.
  const auto refused = [&] {
    asio::ip::tcp::socket probe(io);
    beast::error_code ec;
    probe.connect({asio::ip::make_address("127.0.0.1"), http.port()}, ec);
    return static_cast<bool>(ec);
  };
  const auto stopped_by = Steady::now() + kHangGuard;
  while (!refused() && Steady::now() < stopped_by) {
    std::this_thread::sleep_for(milliseconds(5));  // polling the listener
  }
  EXPECT_TRUE(refused()) << "a connection was accepted after the shutdown began";
  paused.End();
  beast::flat_buffer buffer;
  beast::http::response<beast::http::string_body> response;
  beast::error_code ec;
  beast::http::read(client, buffer, response, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(response.result_int(), 204);  // Redis's answer, once it answered
  EXPECT_FALSE(response.keep_alive());    // and the connection closes after it
  EXPECT_EQ(shutdown.wait_for(kHangGuard), std::future_status::ready);
  EXPECT_EQ(store->redis_stats().degraded, 0u);
}

// Close answers what is still waiting (Cancelled), at once; later decisions get on_error.
// A decision the timeout answered would be degraded, not Cancelled.
TEST(RedisClose, AnswersEverythingStillPending) {
  auto server = RedisServer::Start();  // its own: it stays silent
  ASSERT_NE(server, nullptr);
  auto store = OpenRedis(server->url("timeout=60s&on_error=fail_closed"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("gcra:1000/1s");
  ASSERT_FALSE(store->Decide({"k", policy, 1, std::nullopt})->degraded);
  PausedWrites paused({server.get()});
  std::vector<std::promise<absl::StatusOr<Decision>>> answers(20);
  for (std::size_t i = 0; i < answers.size(); ++i) {
    store->DecideAsync({fmt::format("k{}", i), policy, 1, std::nullopt},
                       [&answers, i](absl::StatusOr<Decision> d) { answers[i].set_value(d); });
  }
  store->Close();
  for (auto& answer : answers) {
    auto got = answer.get_future();
    ASSERT_EQ(got.wait_for(kHangGuard), std::future_status::ready);
    const absl::StatusOr<Decision> result = got.get();
    EXPECT_TRUE(absl::IsCancelled(result.status()))
        << result.status() << (result.ok() && result->degraded ? " (degraded)" : "");
  }
  EXPECT_EQ(store->redis_stats().timeouts, 0u);
  auto after = store->Decide({"k", policy, 1, std::nullopt});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(after->degraded);
  EXPECT_FALSE(after->allowed);
}

TEST(RedisBreaker, AProbeWhoseOutcomeNeverCameIsReplaced) {
  using Clock = redis::Breaker::Clock;
  redis::Breaker breaker(2, milliseconds(100));
  const Clock::time_point t0 = Clock::now();
  breaker.Failure(t0);
  breaker.Failure(t0);
  EXPECT_FALSE(breaker.Allow(t0 + milliseconds(50)));   // open
  EXPECT_TRUE(breaker.Allow(t0 + milliseconds(110)));   // half-open: one probe
  EXPECT_FALSE(breaker.Allow(t0 + milliseconds(120)));  // only one
  EXPECT_TRUE(breaker.Allow(t0 + milliseconds(215)));   // that probe was lost: another
  breaker.Success();
  EXPECT_TRUE(breaker.Allow(t0 + milliseconds(216)));  // closed
  EXPECT_TRUE(breaker.Allow(t0 + milliseconds(217)));
}

TEST(RedisFailure, UnreachableServerIsAClearError) {
  const int port = FreeLoopbackPort();
  auto store =
      RedisStore::Open(*RedisStoreOptions::FromUrl(fmt::format("redis://127.0.0.1:{}", port)));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(std::string(MessageOf(store.status())),
            fmt::format("redis unreachable at 127.0.0.1:{}: connection refused", port));
}

// lazy_connect (what `floodgate serve` uses): the store opens with no Redis there, says
// why in Health(), answers every decision by on_error (at once: an error, not a timeout
// waited out), and switches to Redis once it answers, deciding exactly from then on.
TEST(RedisLazyConnect, OpensWithoutRedisThenSwitchesOnceItAnswers) {
  const int port = FreeLoopbackPort();
  auto opened = RedisStore::Open(*RedisStoreOptions::FromUrl(
      fmt::format("redis://127.0.0.1:{}?lazy_connect=1&on_error=fail_closed&timeout=60s", port)));
  ASSERT_TRUE(opened.ok()) << opened.status();
  RedisStore& store = **opened;
  const absl::Status health = store.Health();
  EXPECT_EQ(std::string(MessageOf(health)),
            fmt::format("redis unreachable at 127.0.0.1:{}: connection refused", port));
  EXPECT_FALSE(store.Ping());
  const Policy policy = *Policy::Parse("fixed_window:5/1h");
  // Redis stays away for at least 1.5 s, long enough for the reconnect backoff to reach
  // its cap (500 ms): decisions meanwhile, a few hundred at most.
  const auto down_until = Steady::now() + milliseconds(1500);
  for (int i = 0; i < 300 && Steady::now() < down_until; ++i) {
    const auto d = store.Decide({"k", policy, 1, std::nullopt});
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(d->degraded);
    EXPECT_FALSE(d->allowed);                      // fail_closed
    std::this_thread::sleep_for(milliseconds(5));  // pacing the load, not synchronisation
  }
  EXPECT_EQ(store.redis_stats().timeouts, 0u) << "answered because Redis is away, not by waiting";

  auto server = RedisServer::Start({}, port);
  ASSERT_NE(server, nullptr);
  const auto answered = TimeUntilRedisAnswers(store, "probe", policy, kHangGuard);
  ASSERT_TRUE(answered.has_value());
  std::printf("Redis answered %lld ms after it was up\n",
              static_cast<long long>(std::chrono::duration_cast<milliseconds>(*answered).count()));
  EXPECT_TRUE(store.Health().ok()) << store.Health();
  EXPECT_TRUE(store.Ping());
  for (int i = 0; i < 8; ++i) {
    const auto d = store.Decide({"exact", policy, 1, std::nullopt});
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_FALSE(d->degraded);
    EXPECT_EQ(d->allowed, i < 5) << i;
  }
  EXPECT_EQ(server->Cli({"EXISTS", "fg:fw:exact"}), "1\n");
}

// Without lazy_connect (the library's default, and `floodgate check` / `replay`), a store
// with no Redis is an error at once: refused, not a connect timeout waited out.
TEST(RedisLazyConnect, OffByDefaultSoOpenFailsFast) {
  const int port = FreeLoopbackPort();
  auto store = RedisStore::Open(*RedisStoreOptions::FromUrl(
      fmt::format("redis://127.0.0.1:{}?lazy_connect=0&connect_timeout=600s", port)));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(std::string(MessageOf(store.status())),
            fmt::format("redis unreachable at 127.0.0.1:{}: connection refused", port));
  EXPECT_FALSE(RedisStoreOptions::FromUrl("redis://h:1?lazy_connect=yes").ok());
}

}  // namespace
}  // namespace floodgate::testing

#pragma once

// What the Redis store's tests share: a server per suite, a prefix per test, lua/batch.lua.

#include <floodgate/redis_store.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/strings.h"
#include "conformance.h"
#include "redis_server.h"
#include "store/redis/lua_sources.h"

namespace floodgate::testing {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using Steady = std::chrono::steady_clock;

// lua/batch.lua as the store loads it (redis::lua::DriverScript).
inline std::string BatchScript() { return redis::lua::DriverScript(redis::lua::k_batch); }

// The conformance vectors on a store opened with batch=1: none batched, none degraded.
inline void ExpectVectorsOneCallPerDecision(RedisStore& store) {
  const auto cases = LoadAllVectors();
  ASSERT_GE(cases.size(), 60u);
  for (std::size_t i = 0; i < cases.size(); ++i) RunCase(store, cases[i], fmt::format("c{}:", i));
  EXPECT_EQ(store.redis_stats().batched_decisions, 0u);
  EXPECT_EQ(store.redis_stats().degraded, 0u);
}

// Hooks for decisions in flight (InFlightHooks) that hold `servers`' script calls while
// they are submitted: the first calls wait in Redis, the rest queue behind them and go
// in batch calls once Redis answers, however fast or slow this machine is. (Left to the
// scheduler, how many share a call went from ~640 of ~700 on a quiet machine to 207
// beside a compiling tree.)
inline InFlightHooks HoldingScriptCalls(std::vector<RedisServer*> servers) {
  auto paused = std::make_shared<std::optional<PausedWrites>>();
  return {[paused, servers] { paused->emplace(servers); }, [paused] { paused->reset(); }};
}

// Every step of every case submitted at once on one connection (a store opened with
// connections=1&batch=7) while `server` holds the first calls: they go out as batch
// script calls, and each decision still sees the ones before it.
inline void ExpectVectorsBatched(RedisStore& store, RedisServer& server) {
  const auto cases = LoadAllVectors();
  const std::size_t decisions = RunCasesInFlight(store, cases, "b", HoldingScriptCalls({&server}));
  // All but the few that went before Redis held the calls.
  EXPECT_GE(store.redis_stats().batched_decisions, decisions * 9 / 10) << decisions;
  EXPECT_EQ(store.redis_stats().degraded, 0u);
}

// `server`'s URL for the running test. Keys of every test live under their own prefix.
// Tests here count exact answers from Redis, so unless one sets its own timeout, a call
// may take a minute (a guard against a hang, as kHangGuard): under a loaded `ctest -j`
// the 50 ms default let a slow call be answered by on_error (degraded, from the local
// limiter), which read as a wrong count, and even 5 s was outlasted by a settle in the
// TSan tree beside two busy neighbours.
inline std::string PerTestUrl(const RedisServer& server, const std::string& options) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string query = fmt::format("prefix=t:{}.{}:", info->test_suite_name(), info->name());
  if (!options.starts_with("timeout=") && options.find("&timeout=") == std::string::npos) {
    query += "&timeout=60s";
  }
  return server.url(options.empty() ? query : query + "&" + options);
}

// One redis-server per suite: on TCP loopback (RedisTest), or on a unix socket only.
template <bool kUnixSocket>
class RedisServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = kUnixSocket ? RedisServer::StartOnUnixSocket() : RedisServer::Start();
  }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  static std::string Url(const std::string& options = "") { return PerTestUrl(*server_, options); }

  static inline std::unique_ptr<RedisServer> server_;
};
using RedisTest = RedisServerTest<false>;
using RedisUnixTest = RedisServerTest<true>;

}  // namespace floodgate::testing

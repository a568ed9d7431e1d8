#pragma once

// What the Redis store's tests share: a server per suite, a prefix per test, lua/batch.lua.

#include <floodgate/redis_store.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

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

class RedisTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = RedisServer::Start(); }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  // Keys of every test live under their own prefix. Tests here count exact answers from
  // Redis, so unless one sets its own timeout, a call may take 10 s: under a loaded
  // `ctest -j` the 50 ms default let a slow call be answered by on_error (degraded, from
  // the local limiter), which read as a wrong count.
  static std::string Url(const std::string& options = "") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string query = fmt::format("prefix=t:{}.{}:", info->test_suite_name(), info->name());
    if (!options.starts_with("timeout=") && options.find("&timeout=") == std::string::npos) {
      query += "&timeout=10s";
    }
    return server_->url(options.empty() ? query : query + "&" + options);
  }

  static inline std::unique_ptr<RedisServer> server_;
};

}  // namespace floodgate::testing

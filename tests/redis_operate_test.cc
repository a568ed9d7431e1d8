// Operating a key on Redis beyond the vectors (which run on every store): at the server's
// clock, the denial cache forgotten, a failure answered as an error, refused arguments.

#include "redis_test_fixture.h"

namespace floodgate::testing {
namespace {

TEST_F(RedisTest, OperationsAtTheServersClockOnEveryAlgorithm) {
  auto store = OpenRedis(Url("denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  for (const char* text : {"gcra:5/1h", "token_bucket:5/1h", "token_bucket:5/1h,refill=interval",
                           "sliding_log:5/1h", "sliding_window:5/1h", "fixed_window:5/1h",
                           "fixed_window:5/1d,tz=Europe/Berlin", "gcra:5/1h,block=1h"}) {
    const Policy policy = *Policy::Parse(text);
    const std::string key = std::string("server-clock:") + text;
    auto penalized = store->Operate({key, policy, KeyOperation::kPenalize, 7, std::nullopt});
    ASSERT_TRUE(penalized.ok()) << text << ": " << penalized.status();
    EXPECT_TRUE(penalized->allowed) << text;
    EXPECT_EQ(penalized->remaining, 0) << text;
    EXPECT_GT(penalized->reset_after.count(), 0) << text;
    EXPECT_FALSE(store->Decide({key, policy, 1, std::nullopt})->allowed) << text;
    auto refunded = store->Operate({key, policy, KeyOperation::kRefund, 3, std::nullopt});
    ASSERT_TRUE(refunded.ok()) << text << ": " << refunded.status();
    // 7 - 3 spent of 5, at the same hour; under block= the denial above blocked the key,
    // and a refund never lifts a block.
    EXPECT_EQ(refunded->remaining, policy.block.count() > 0 ? 0 : 1) << text;
    EXPECT_EQ(refunded->blocked, policy.block.count() > 0) << text;
    auto reset = store->Operate({key, policy, KeyOperation::kReset, 0, std::nullopt});
    ASSERT_TRUE(reset.ok()) << text << ": " << reset.status();
    EXPECT_EQ(reset->remaining, 5) << text;
    EXPECT_EQ(reset->reset_after.count(), 0) << text;
    EXPECT_FALSE(reset->blocked) << text;
    EXPECT_TRUE(store->Decide({key, policy, 5, std::nullopt})->allowed) << text;
  }
  EXPECT_EQ(store->redis_stats().degraded, 0u);
}

// The store's cached denial of a key (answered without asking Redis) goes with a reset.
TEST_F(RedisTest, AResetForgetsTheDenialCachesAnswer) {
  auto store = OpenRedis(Url("denial_cache=1ms"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:1/1h");
  ASSERT_TRUE(store->Decide({"cached", policy, 1, std::nullopt})->allowed);
  ASSERT_FALSE(store->Decide({"cached", policy, 1, std::nullopt})->allowed);
  const std::uint64_t hits = store->redis_stats().denial_cache_hits;
  ASSERT_FALSE(store->Decide({"cached", policy, 1, std::nullopt})->allowed);
  ASSERT_EQ(store->redis_stats().denial_cache_hits, hits + 1) << "the denial was not cached";
  ASSERT_TRUE(store->Operate({"cached", policy, KeyOperation::kReset, 0, std::nullopt}).ok());
  EXPECT_TRUE(store->Decide({"cached", policy, 1, std::nullopt})->allowed);
}

// An operation that Redis did not answer is an error whatever on_error says: a fallback
// answer would claim a reset that never happened.
TEST(RedisOperateFailure, IsAnErrorNeverOnErrorsAnswer) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  auto store = OpenRedis(server->url("on_error=fail_open&timeout=2s"));
  ASSERT_NE(store, nullptr);
  server->Kill();
  const Policy policy = *Policy::Parse("gcra:5/1s");
  for (const KeyOperation op : {KeyOperation::kReset, KeyOperation::kRefund}) {
    auto answer =
        store->Operate({"k", policy, op, op == KeyOperation::kReset ? 0 : 1, std::nullopt});
    ASSERT_FALSE(answer.ok());
    EXPECT_EQ(answer.status().code(), absl::StatusCode::kUnavailable) << answer.status();
    EXPECT_THAT(answer.status().message(), HasSubstr("outcome is unknown"));
  }
  EXPECT_TRUE(store->Decide({"k", policy, 1, std::nullopt})->degraded);  // decisions fall back
}

// lua/operate.lua checks its own arguments (the store never sends these).
TEST_F(RedisTest, TheOperateScriptRefusesBadArguments) {
  const std::string script = redis::lua::DriverScript(redis::lua::k_operate);
  const auto eval = [&](std::vector<std::string> argv) {
    std::vector<std::string> args = {"EVAL", script, "1", "t:bad-operate"};
    args.insert(args.end(), argv.begin(), argv.end());
    return server_->Cli(args);
  };
  EXPECT_THAT(eval({"gcra", "", "5", "1000000", "5", "reset", "1"}), HasSubstr("units must be 0"));
  EXPECT_THAT(eval({"gcra", "", "5", "1000000", "5", "refund", "0"}), HasSubstr("units must be"));
  EXPECT_THAT(eval({"gcra", "", "5", "1000000", "5", "wipe", "0"}),
              HasSubstr("operation must be reset, refund or penalize"));
  EXPECT_THAT(eval({"cc", "", "5", "1000000", "5", "refund", "1"}), HasSubstr("release"));
  EXPECT_THAT(eval({"gcra", "", "5", "1000000", "5", "refund"}), HasSubstr("7 arguments"));
  // And a good call answers the peek: 4 integers.
  EXPECT_THAT(eval({"gcra", "1700000000000000", "5", "1000000", "5", "penalize", "2"}),
              HasSubstr("3"));
}

}  // namespace
}  // namespace floodgate::testing

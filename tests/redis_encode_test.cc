// The script calls the Redis store sends, without a server: golden argument layouts.
//
// Of the single, batch, node batch and reservation scripts, and the handshake's detection of
// script flags.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "store/redis/encode.h"
#include "store/redis/lua_sources.h"
#include "store/redis/resp.h"
#include "store/redis/script_layout.h"
#include "store/redis/scripts.h"

namespace floodgate::redis {
namespace {

using Args = std::vector<std::string>;

// RESP arrays of bulk strings back into their arguments, one command after another.
std::vector<Args> Commands(std::string_view resp) {
  std::vector<Args> commands;
  const auto line = [&resp]() {
    const std::size_t end = resp.find("\r\n");
    std::string text(resp.substr(0, end));
    resp.remove_prefix(end + 2);
    return text;
  };
  while (!resp.empty()) {
    const std::string count = line();
    EXPECT_EQ(count[0], '*');
    Args args;
    for (int n = std::stoi(count.substr(1)); n > 0; --n) {
      const std::string size = line();
      EXPECT_EQ(size[0], '$');
      const std::size_t bytes = std::stoul(size.substr(1));
      args.emplace_back(resp.substr(0, bytes));
      EXPECT_EQ(resp.substr(bytes, 2), "\r\n");
      resp.remove_prefix(bytes + 2);
    }
    commands.push_back(std::move(args));
  }
  return commands;
}

class RedisEncode : public ::testing::Test {
 protected:
  RedisEncode() {
    for (int i = 0; i < kScriptCount; ++i) scripts_.set_sha(ScriptId(i), "sha" + std::to_string(i));
  }

  static Policy Gcra(std::int64_t limit, std::int64_t burst = 0) {
    Policy policy;
    policy.limit = limit;
    policy.period = std::chrono::seconds(1);
    policy.burst = burst;
    return policy;
  }
  static Policy Concurrency(std::int64_t limit) {
    Policy policy;
    policy.algorithm = Algorithm::kConcurrency;
    policy.limit = limit;
    policy.period = std::chrono::seconds(30);
    return policy;
  }

  static UnitPtr Make(Operation op, std::vector<std::pair<std::string, Policy>> keys,
                      std::int64_t cost = 1, std::optional<std::int64_t> now_us = {}) {
    auto unit = std::make_shared<Unit>();
    unit->op = std::move(op);
    unit->now_us = now_us;
    for (auto& [key, policy] : keys) {
      const core::StateKind kind = core::KindOf(policy);
      std::string redis_key = RedisKey("fg:", kind, key);
      const std::size_t key_at = redis_key.size() - key.size();
      unit->items.push_back(Item{std::move(redis_key), key_at, policy, cost, kind});
    }
    return unit;
  }

  std::vector<Args> Encoded(const std::vector<UnitPtr>& chunk, ScriptForm form = ScriptForm::kSha,
                            Asking asking = Asking::kNo) {
    const EncodedCall call = Encode(chunk, scripts_, form, asking);
    std::vector<Args> commands = Commands(call.command);
    // The script call starts right after ASKING.
    EXPECT_EQ(Commands(std::string_view(call.command).substr(call.asking_bytes)).size(), 1u);
    return commands;
  }

  Scripts scripts_;
};

TEST_F(RedisEncode, SingleDecisionByItsAlgorithmsScript) {
  const auto chunk = std::vector{Make(Decide{}, {{"u", Gcra(10, 20)}}, 3)};
  EXPECT_TRUE(SingleCall(chunk));
  EXPECT_EQ(Encoded(chunk), (std::vector<Args>{{"EVALSHA", "sha0", "1", "fg:gcra:u", "gcra", "",
                                                "10", "1000000", "20", "3"}}));
  EXPECT_EQ(Encode(chunk, scripts_, ScriptForm::kSha, Asking::kNo).keys, 1u);
}

TEST_F(RedisEncode, SingleDecisionAtTheCallersClock) {
  const auto chunk = std::vector{Make(Decide{}, {{"u", Gcra(10)}}, 1, 1'000'000)};
  EXPECT_EQ(Encoded(chunk), (std::vector<Args>{{"EVALSHA", "sha0", "1", "fg:gcra:u", "gcra",
                                                "1000000", "10", "1000000", "10", "1"}}));
}

// A calendar policy's period argument is the bounds around the decision's now
// (docs/algorithms.md, "Calendar windows"; lua/common.lua FG.parse_calendar).
TEST_F(RedisEncode, CalendarPolicySendsTheWindowBoundsAroundNow) {
  Policy policy = *Policy::Parse("fixed_window:3/1d,tz=America/New_York");
  // 2028-03-12T12:00-04:00, the 23-hour day: the window before it and four after.
  const std::int64_t now = 1836489600000000;
  auto unit = Make(Decide{}, {{"u", policy}}, 1, now);
  unit->items[0].calendar = CalendarArgument(policy, now);
  // Days since 1970-01-01 (March 11 2028 is day 21254), starts at local midnight: 05:00Z,
  // then 05:00Z (the day that loses an hour), then 04:00Z.
  EXPECT_EQ(unit->items[0].calendar,
            "c21254:1836363600000000:1836450000000000:1836532800000000:1836619200000000:"
            "1836705600000000");
  EXPECT_EQ(Encoded({unit}), (std::vector<Args>{{"EVALSHA", "sha4", "1", "fg:fw:u", "fw",
                                                  "1836489600000000", "3",
                                                  unit->items[0].calendar, "3", "1"}}));
  // Without tz nothing is added: the period in µs as before.
  EXPECT_TRUE(CalendarArgument(*Policy::Parse("fixed_window:3/1d"), now).empty());
}

TEST_F(RedisEncode, EvalCarriesTheScriptsBody) {
  const auto chunk = std::vector{Make(Decide{}, {{"u", Gcra(10)}})};
  const auto commands = Encoded(chunk, ScriptForm::kBody);
  ASSERT_EQ(commands.size(), 1u);
  ASSERT_EQ(commands[0].size(), 10u);
  EXPECT_EQ(commands[0][0], "EVAL");
  EXPECT_EQ(commands[0][1], scripts_.body(ScriptId::kGcra));
  EXPECT_NE(commands[0][1].find("redis.call"), std::string::npos);
}

TEST_F(RedisEncode, AskingGoesFirstInTheSameWrite) {
  const auto chunk = std::vector{Make(Decide{}, {{"u", Gcra(10)}})};
  const EncodedCall call = Encode(chunk, scripts_, ScriptForm::kSha, Asking::kYes);
  EXPECT_EQ(call.command.substr(0, call.asking_bytes), "*1\r\n$6\r\nASKING\r\n");
  const auto commands = Encoded(chunk, ScriptForm::kSha, Asking::kYes);
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_EQ(commands[0], Args{"ASKING"});
  EXPECT_EQ(commands[1][0], "EVALSHA");
}

TEST_F(RedisEncode, BatchSendsEachPolicyOnce) {
  // Two decisions under one policy, one under another, one at the caller's clock.
  const auto chunk = std::vector{
      Make(Decide{}, {{"a", Gcra(10)}}),
      Make(Decide{}, {{"b", Gcra(5)}}, 2),
      Make(Decide{}, {{"c", Gcra(10)}}, 1, 42),
  };
  EXPECT_FALSE(SingleCall(chunk));
  EXPECT_EQ(Encoded(chunk),
            (std::vector<Args>{{"EVALSHA", "sha6", "3", "fg:gcra:a", "fg:gcra:b", "fg:gcra:c",
                                "2", "gcra", "10", "1000000", "10", "gcra", "5", "1000000", "5",
                                "0",                       // no listed groups
                                "1", "", "1", "2", "", "2", "1", "42", "1"}}));
}

TEST_F(RedisEncode, MultiDecisionJoinsItsItems) {
  // All or nothing without shadows: the items after the first join by '+'.
  const auto group = Make(MultiAll{}, {{"a", Gcra(10)}, {"b", Gcra(5)}});
  EXPECT_EQ(Encoded({group}),
            (std::vector<Args>{{"EVALSHA", "sha6", "2", "fg:gcra:a", "fg:gcra:b", "2", "gcra",
                                "10", "1000000", "10", "gcra", "5", "1000000", "5", "0", "1", "",
                                "1", "+2", "", "1"}}));
}

TEST_F(RedisEncode, WholeMultiDecisionOfOneItemIsItsSingleDecision) {
  const auto group = Make(MultiAll{.whole = true}, {{"a", Gcra(10)}});
  EXPECT_TRUE(SingleCall(std::vector{group}));
  EXPECT_EQ(Encoded({group}), (std::vector<Args>{{"EVALSHA", "sha0", "1", "fg:gcra:a", "gcra", "",
                                                  "10", "1000000", "10", "1"}}));
}

TEST_F(RedisEncode, ListedGroupsWithShadowsDryRunsAndReleases) {
  const auto shadowed = Make(MultiAll{}, {{"a", Gcra(10)}, {"b", Gcra(5)}});
  shadowed->items[1].shadow = true;
  const auto dry = Make(MultiDry{}, {{"c", Gcra(10)}});
  const auto release = Make(MultiRelease{.admitted_at = 77}, {{"d", Gcra(10)}}, 4, 77);
  EXPECT_EQ(Encoded({shadowed, dry, release}),
            (std::vector<Args>{{"EVALSHA", "sha6", "4", "fg:gcra:a", "fg:gcra:b", "fg:gcra:c",
                                "fg:gcra:d", "2", "gcra", "10", "1000000", "10", "gcra", "5",
                                "1000000", "5",
                                "3",                             // groups: first, count, mode,
                                "1", "2", "all", "2", "",        // shadow mask, admitted at
                                "3", "1", "dry", "0", "",        //
                                "4", "1", "release", "0", "77",  //
                                "1", "", "1", "2", "", "1", "1", "", "1", "1", "77", "4"}}));
}

TEST_F(RedisEncode, ReservationsAndLeases) {
  const auto reserve =
      Make(Reserve{.record_key = "fg:res:{x}:00000000000000ff", .hold_us = 5'000'000},
           {{"r", Gcra(10)}}, 3);
  const auto settle = Make(Settle{}, {{"s", Policy{}}}, 2, 9);
  const auto acquire = Make(LeaseAcquire{.random = "00000000000000aa"}, {{"l", Concurrency(4)}});
  const auto acquire_at =
      Make(LeaseAcquire{.random = "00000000000000bb"}, {{"m", Concurrency(4)}}, 1, 11);
  const auto release =
      Make(LeaseRelease{.member = "00000000000000aa.30000000.4.5"}, {{"l", Concurrency(4)}}, 0);
  const auto release_cost =
      Make(LeaseRelease{.member = "00000000000000aa.30000000.4.5"}, {{"l", Concurrency(4)}}, 1);
  const std::vector chunk{reserve, settle, acquire, acquire_at, release, release_cost};
  EXPECT_EQ(Encode(chunk, scripts_, ScriptForm::kSha, Asking::kNo).keys, 7u);
  EXPECT_EQ(Encoded(chunk),
            (std::vector<Args>{{
                "EVALSHA", "sha7", "7", "fg:gcra:r", "fg:res:{x}:00000000000000ff", "fg:gcra:s",
                "fg:cc:l", "fg:cc:m", "fg:cc:l", "fg:cc:l",          //
                "2", "gcra", "10", "1000000", "10", "cc", "4", "30000000", "4",  //
                "6",                                                 // operations
                "r", "1", "", "3", "5000000",                        //
                "s", "9", "2",                                       //
                "a", "2", "00000000000000aa",                        //
                "A", "2", "11", "00000000000000bb",                  //
                "l", "00000000000000aa.30000000.4.5",                //
                "L", "", "1", "00000000000000aa.30000000.4.5",       //
            }}));
}

TEST_F(RedisEncode, ANodesBatchOverSeveralSlotsRoutesByItsFirstKey) {
  // Slots as the batcher sorts them: a slot's units adjacent, a multi-decision on one slot.
  auto a = Make(Decide{}, {{"a", Gcra(10)}});
  auto a_again = Make(Decide{}, {{"a", Gcra(10)}}, 2);
  auto group = Make(MultiAll{}, {{"{t}b", Gcra(10)}, {"{t}c", Gcra(5)}});
  auto d = Make(Decide{}, {{"d", Gcra(10)}}, 1, 42);
  a->route.slot = a_again->route.slot = 7;
  group->route.slot = 9;
  d->route.slot = 11;
  const std::vector chunk{a, a_again, group, d};
  const EncodedCall call = Encode(chunk, scripts_, ScriptForm::kSha, Asking::kNo);
  EXPECT_TRUE(call.across_slots);
  EXPECT_EQ(call.keys, 5u);
  EXPECT_EQ(Encoded(chunk),
            (std::vector<Args>{{"EVALSHA", "sha8", "1", "fg:gcra:a",              //
                                "5", "10101",                                     // n, slot marks
                                "fg:gcra:a", "fg:gcra:{t}b", "fg:gcra:{t}c", "fg:gcra:d",  //
                                "2", "gcra", "10", "1000000", "10", "gcra", "5", "1000000", "5",
                                "0",  // no listed groups
                                "1", "", "1", "1", "", "2", "1", "", "1", "+2", "", "1", "1",
                                "42", "1"}}));
  // One slot: the batch script with every key declared, as before.
  d->route.slot = group->route.slot = 7;
  EXPECT_FALSE(Encode(chunk, scripts_, ScriptForm::kSha, Asking::kNo).across_slots);
  EXPECT_EQ(Encoded(chunk)[0][1], "sha6");
  EXPECT_EQ(Encoded(chunk)[0][2], "5");
}

// envoyproxy/ratelimit's counters: upstream's keys as they are, hits and TTL per key; a read
// (ttl 0) sends an empty TTL.
TEST_F(RedisEncode, CountersGoByTheUpstreamScriptWithTheirKeysAsTheyAre) {
  const auto counter = [](std::string key, std::int64_t hits, std::int64_t ttl_s) {
    auto unit = std::make_shared<Unit>();
    unit->op = Count{.ttl_s = ttl_s};
    unit->items.push_back(Item{std::move(key), 0, Policy{}, hits, core::StateKind::kFixedWindow});
    return unit;
  };
  const std::vector chunk{counter("pre_d_user_a_1767225600", 3, 3600 + 17),
                          counter("d_path_/x_1767225600", 0, 0)};
  const EncodedCall call = Encode(chunk, scripts_, ScriptForm::kSha, Asking::kNo);
  EXPECT_FALSE(call.across_slots);
  EXPECT_EQ(call.keys, 2u);
  EXPECT_EQ(Encoded(chunk), (std::vector<Args>{{"EVALSHA", "sha9", "2", "pre_d_user_a_1767225600",
                                                "d_path_/x_1767225600", "3", "3617", "0", ""}}));
  EXPECT_EQ(Encoded(chunk, ScriptForm::kBody)[0][1], scripts_.body(ScriptId::kUpstream));
}

// Each operation sends the arguments its row of script_layout.h names, no more, no fewer.
TEST_F(RedisEncode, EveryOperationSendsItsLayoutsRow) {
  using namespace layout;  // NOLINT(google-build-using-namespace): the table's rows
  const auto single = Encoded({Make(Decide{}, {{"u", Gcra(10)}})})[0];
  EXPECT_EQ(single.size(), 4 + kSingle.size());  // EVALSHA, SHA, 1, the key
  // One operation of lua/reservation.lua: after its keys, p (0 or 1) policies, n = 1.
  const auto operation = [&](UnitPtr unit, std::size_t keys) {
    const Args args = Encoded({std::move(unit)})[0];
    const std::size_t p = std::stoul(args[3 + keys]);
    const std::size_t at = 3 + keys + 1 + p * kPolicy.size();
    EXPECT_EQ(args[at], "1");  // n
    return Args(args.begin() + at + 1, args.end());
  };
  const auto expect_row = [](const Args& sent, std::span<const Field> row) {
    ASSERT_EQ(sent.size(), row.size());
    EXPECT_EQ(sent[0], row[0]);  // the operation's letter
  };
  expect_row(operation(Make(Reserve{"fg:res:{u}:1", 5}, {{"u", Gcra(10)}}), 2), kReserve);
  expect_row(operation(Make(Take{"fg:res:{u}:1", 5}, {{"u", Gcra(10)}}), 2), kTake);
  expect_row(operation(Make(Settle{}, {{"fg:res:{u}:1", Policy{}}}), 1), kSettle);
  expect_row(operation(Make(LeaseAcquire{"aa"}, {{"l", Concurrency(4)}}, 1, 7), 1), kAcquire);
  expect_row(operation(Make(LeaseAcquire{"aa"}, {{"l", Concurrency(4)}}), 1), kAcquireNow);
  expect_row(operation(Make(LeaseRelease{"aa.1.2.3"}, {{"l", Concurrency(4)}}, 1), 1), kRelease);
  expect_row(operation(Make(LeaseRelease{"aa.1.2.3"}, {{"l", Concurrency(4)}}, 0), 1), kReleaseNow);
  // lua/operate.lua: the single script's arguments, the operation and its units for the cost.
  const auto operate = Encoded({Make(Operate{KeyOperation::kRefund, 3}, {{"u", Gcra(10)}})})[0];
  ASSERT_EQ(operate.size(), 4 + kOperate.size());
  EXPECT_EQ(operate[1], "sha10");
  EXPECT_EQ(operate[4 + 5], "refund");
  EXPECT_EQ(operate[4 + 6], "3");
  // lua/batch.lua: a listed group and two decisions after one policy.
  const Args batch =
      Encoded({Make(MultiDry{}, {{"a", Gcra(10)}}), Make(Decide{}, {{"b", Gcra(10)}})})[0];
  const std::size_t groups_at = 3 + 2 + 1 + kPolicy.size();
  EXPECT_EQ(batch[groups_at], "1");
  EXPECT_EQ(batch.size(), groups_at + 1 + kGroup.size() + 2 * kDecision.size());
}

// lua/README.md and the drivers' opening comments show every row of script_layout.h as
// its fields joined by ", ".
TEST(ScriptLayout, TheReadmeAndTheDriversShowEveryRow) {
  using namespace layout;  // NOLINT(google-build-using-namespace): the table's rows
  const auto text = [](std::span<const Field> row) {
    std::string joined;
    for (Field field : row) joined.append(joined.empty() ? "" : ", ").append(field);
    return joined;
  };
  std::ifstream file(FLOODGATE_LUA_README);
  ASSERT_TRUE(file) << FLOODGATE_LUA_README;
  std::stringstream readme;
  readme << file.rdbuf();
  const std::vector<std::span<const Field>> every = {
      kSingle,        kPolicy,         kGroup,   kDecision,   kNodeBatch, kReserve,
      kTake,          kSettle,         kAcquire, kAcquireNow, kRelease,   kReleaseNow,
      kDecisionReply, kOperationReply, kCounter, kOperate};
  for (std::span<const Field> row : every) {
    EXPECT_NE(readme.str().find(text(row)), std::string::npos) << "lua/README.md: " << text(row);
  }
  const std::vector<std::pair<std::string_view, std::vector<std::span<const Field>>>> drivers = {
      {lua::k_single, {kSingle, kDecisionReply}},
      {lua::k_batch, {kPolicy, kGroup, kDecision, kDecisionReply}},
      {lua::k_node_batch, {kNodeBatch}},
      {lua::k_upstream, {kCounter}},
      {lua::k_operate, {kOperate, kDecisionReply}},
      {lua::k_reservation,
       {kPolicy, kReserve, kTake, kSettle, kAcquire, kAcquireNow, kRelease, kReleaseNow,
        kOperationReply}},
  };
  // A driver's opening comment: its lines up to the first that is not a comment.
  const auto opening = [](std::string_view source) {
    std::size_t end = 0;
    while (end < source.size() && source.substr(end).starts_with("--")) {
      const std::size_t next = source.find('\n', end);
      end = next == std::string_view::npos ? source.size() : next + 1;
    }
    return source.substr(0, end);
  };
  for (const auto& [driver, rows] : drivers) {
    const std::string_view comment = opening(driver);
    for (std::span<const Field> row : rows) {
      EXPECT_NE(comment.find(text(row)), std::string::npos)
          << driver.substr(0, driver.find('\n')) << ": " << text(row);
    }
  }
}

TEST_F(RedisEncode, TheNodeBatchScriptCarriesItsFlagsOnItsFirstLine) {
  const std::string& body = scripts_.body(ScriptId::kNodeBatch);
  EXPECT_EQ(body.substr(0, body.find('\n')), "#!lua flags=allow-cross-slot-keys");
  EXPECT_EQ(scripts_.body(ScriptId::kBatch).find("#!"), std::string::npos);
}

// A reply as hiredis gives it, for the handshake's checks.
redisReply Reply(int type, std::string& text) {
  redisReply reply{};
  reply.type = type;
  reply.str = text.data();
  reply.len = text.size();
  return reply;
}

TEST(RedisHandshake, ScriptFlagsAreDetectedFromTheNodeBatchScriptsLoad) {
  std::string sha = "0123456789abcdef0123456789abcdef01234567";
  // Redis 6.2 compiles the shebang line as Lua.
  std::string old = "ERR Error compiling script (new function): user_script:1: unexpected "
                    "symbol near '#'";
  EXPECT_EQ(BatchingFrom(Reply(REDIS_REPLY_STRING, sha)), Batching::kPerNode);
  EXPECT_EQ(BatchingFrom(Reply(REDIS_REPLY_ERROR, old)), Batching::kPerSlot);

  RedisStoreOptions options;
  Scripts scripts;
  Handshake handshake(options, scripts);
  // Standalone: no node batch script to load (PING, then the other scripts).
  std::vector<HandshakeStep> steps;
  handshake.Login("h:1", steps);
  handshake.LoadScripts("h:1", steps);
  EXPECT_EQ(steps.size(), 1u + kScriptCount - 1);
  // A cluster's connection loads it last; its answer is the connection's Batching.
  Batching batching = Batching::kPerSlot;
  handshake.LoadNodeBatch([&batching](Batching found) { batching = found; }, steps);
  ASSERT_EQ(steps.size(), 1u + kScriptCount);
  EXPECT_NE(steps.back().command.find("allow-cross-slot-keys"), std::string::npos);
  const HandshakeStep& node_script = steps.back();
  // Refused: the connection still comes up, batching by slot, and the refusal is counted.
  EXPECT_EQ(handshake.node_batch_refusals(), 0u);
  EXPECT_TRUE(node_script.check(Reply(REDIS_REPLY_ERROR, old)).ok());
  EXPECT_EQ(batching, Batching::kPerSlot);
  EXPECT_EQ(handshake.node_batch_refusals(), 1u);
  EXPECT_TRUE(node_script.check(Reply(REDIS_REPLY_STRING, sha)).ok());
  EXPECT_EQ(batching, Batching::kPerNode);
  EXPECT_EQ(handshake.node_batch_refusals(), 1u);
  EXPECT_EQ(scripts.sha(ScriptId::kNodeBatch), sha);
  // Another script's refusal still fails the handshake.
  EXPECT_FALSE(steps[1].check(Reply(REDIS_REPLY_ERROR, old)).ok());
  // A forced result (tests) wins over the reply.
  batching = Batching::kPerNode;
  Handshake forced(options, scripts, Batching::kPerSlot);
  std::vector<HandshakeStep> forced_steps;
  forced.LoadNodeBatch([&batching](Batching found) { batching = found; }, forced_steps);
  EXPECT_TRUE(forced_steps.back().check(Reply(REDIS_REPLY_STRING, sha)).ok());
  EXPECT_EQ(batching, Batching::kPerSlot);
}

// Each handshake command carries the check of its own answer, whatever comes before it.
TEST(RedisHandshake, EachCommandIsCheckedByItsOwnStep) {
  RedisStoreOptions options;
  options.password = "p";
  options.db = 2;
  Scripts scripts;
  Handshake handshake(options, scripts);
  std::vector<HandshakeStep> steps;
  handshake.Login("h:1", steps);
  handshake.ConfirmPrimary("h:1", steps);
  handshake.LoadScripts("h:1", steps);
  ASSERT_EQ(steps.size(), 3u + kScriptCount - 1);
  EXPECT_NE(steps[0].command.find("AUTH"), std::string::npos);
  EXPECT_NE(steps[1].command.find("SELECT"), std::string::npos);
  EXPECT_NE(steps[2].command.find("ROLE"), std::string::npos);
  std::string refused = "ERR no";
  EXPECT_NE(steps[0].check(Reply(REDIS_REPLY_ERROR, refused)).message().find("refused AUTH"),
            std::string::npos);
  EXPECT_NE(steps[1].check(Reply(REDIS_REPLY_ERROR, refused)).message().find("refused SELECT"),
            std::string::npos);
  EXPECT_NE(steps[2].check(Reply(REDIS_REPLY_ERROR, refused)).message().find("refused ROLE"),
            std::string::npos);
  // ROLE's answer must name a primary.
  std::string is = "slave";
  redisReply name = Reply(REDIS_REPLY_STRING, is);
  redisReply* element[] = {&name};
  redisReply role{};
  role.type = REDIS_REPLY_ARRAY;
  role.elements = 1;
  role.element = element;
  EXPECT_TRUE(absl::IsUnavailable(steps[2].check(role)));
  is = "master";
  name = Reply(REDIS_REPLY_STRING, is);
  EXPECT_TRUE(steps[2].check(role).ok());
  // A SCRIPT LOAD's answer is its script's SHA.
  std::string sha = "0123456789abcdef0123456789abcdef01234567";
  EXPECT_TRUE(steps[3].check(Reply(REDIS_REPLY_STRING, sha)).ok());
  EXPECT_EQ(scripts.sha(ScriptId::kGcra), sha);
  EXPECT_FALSE(steps[3].check(Reply(REDIS_REPLY_STATUS, sha)).ok());
}

}  // namespace
}  // namespace floodgate::redis

// What goes over the wire to Redis, and what comes back.
//
// Hostile keys, the scripts' argument checks, NOSCRIPT, authentication, RESP reading and
// formatting, URLs.
#include <hiredis/hiredis.h>

#include <atomic>
#include <random>
#include <thread>

#include "redis_test_fixture.h"
#include "store/redis/resp.h"

namespace floodgate::testing {
namespace {

// Client input only ever travels as a script argument: keys made of quotes, newlines,
// NULs, RESP fragments and Lua code are stored under exactly their bytes, counted apart,
// and never run.
TEST_F(RedisTest, HostileKeysAreOnlyEverArguments) {
  auto store = OpenRedis(Url("denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  server_->Cli({"SET", "canary", "1"});
  const std::vector<std::string> keys = {
      "quote\"'`",
      "new\nline\r\n",
      std::string("nul\0inside", 10),
      std::string("\0", 1),
      "*1\r\n$8\r\nFLUSHALL\r\n",
      "\r\n*3\r\n$3\r\nSET\r\n$5\r\npwned\r\n$1\r\n1\r\n",
      "]]) redis.call('SET', 'pwned', '1') --",
      "'); redis.call('FLUSHALL'); --",
      "KEYS[1]",
      "ARGV[1]",
      std::string(512, '\xff'),
  };
  const Policy policy = *Policy::Parse("fixed_window:2/1h");
  for (const std::string& key : keys) {
    for (int i = 0; i < 3; ++i) {
      auto d = store->Decide({key, policy, 1, std::nullopt});
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_FALSE(d->degraded);
      EXPECT_EQ(d->allowed, i < 2) << "attempt " << i;  // each key counted on its own
    }
  }
  redisContext* redis = redisConnect("127.0.0.1", server_->port());
  ASSERT_TRUE(redis != nullptr && redis->err == 0);
  const std::string prefix =
      fmt::format("t:{}.{}:fw:", "RedisTest", "HostileKeysAreOnlyEverArguments");
  for (const std::string& key : keys) {
    const std::string stored = prefix + key;
    const char* argv[] = {"EXISTS", stored.data()};
    const std::size_t lengths[] = {6, stored.size()};
    auto* reply = static_cast<redisReply*>(redisCommandArgv(redis, 2, argv, lengths));
    ASSERT_NE(reply, nullptr);
    EXPECT_EQ(reply->integer, 1) << "key stored under other bytes";
    freeReplyObject(reply);
  }
  redisFree(redis);
  EXPECT_EQ(server_->Cli({"EXISTS", "pwned"}), "0\n");
  EXPECT_EQ(server_->Cli({"GET", "canary"}), "1\n");
}

// The scripts check every argument before any decision runs, so bad input never applies
// half a batch; a batch checks each distinct argument string once and reuses it, which
// must not let a bad one through. Errors name the decision or policy and the reason.
TEST_F(RedisTest, ScriptsCheckEveryArgumentBeforeDecidingAnything) {
  const std::string batch = BatchScript();
  const std::string single = redis::lua::SingleScript(redis::lua::k_gcra);
  const auto eval = [&](const std::string& script, std::vector<std::string> args) {
    args.insert(args.begin(), {"EVAL", script});
    return server_->Cli(args);
  };
  // How redis-cli prints an error reply when its output is not a terminal.
  const auto Error = [](const std::string& message) { return message + "\n\n"; };
  const std::vector<std::string> gcra = {"1", "gcra", "10", "1000000", "10"};
  // p, its policies, the groups (g, then 5 values each), then 3 values per decision.
  const auto batch_of = [&](std::vector<std::string> policy,
                            std::vector<std::array<std::string, 3>> decisions,
                            std::vector<std::string> groups = {"0"}) {
    std::vector<std::string> args = {std::to_string(decisions.size())};
    for (std::size_t i = 0; i < decisions.size(); ++i) args.push_back(fmt::format("args:k{}", i));
    args.insert(args.end(), policy.begin(), policy.end());
    args.insert(args.end(), groups.begin(), groups.end());
    for (const auto& d : decisions) args.insert(args.end(), d.begin(), d.end());
    return eval(batch, args);
  };
  // Two decisions, then the server clock the batch read.
  EXPECT_THAT(batch_of(gcra, {{"1", "", "1"}, {"1", "", "1"}}),
              ::testing::StartsWith("1\n9\n0\n100000\n1\n9\n0\n100000\n1"));
  server_->Cli({"DEL", "args:k0", "args:k1", "args:k2"});
  // Groups: a known mode, in range, not overlapping, a release time for releases only.
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"1", "", "1"}}, {"1", "1", "2", "some", "0", ""}),
            Error("floodgate: group 1: mode must be all, dry or release"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"1", "", "1"}}, {"1", "2", "2", "all", "0", ""}),
            Error("floodgate: group 1: items out of range or overlapping another group"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"1", "", "1"}, {"1", "", "1"}},
                     {"2", "1", "2", "all", "0", "", "2", "2", "all", "0", ""}),
            Error("floodgate: group 2: items out of range or overlapping another group"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}}, {"1", "1", "1", "release", "0", ""}),
            Error("floodgate: group 1: at is the release time, given for release groups only"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}}, {"1", "1", "1", "all", "65536", ""}),
            Error("floodgate: group 1: shadow mask must be an integer in [0, 65535]"));

  // An unlisted group: '+' joins the previous item's group, never a listed group's item,
  // and never past 16 items.
  EXPECT_EQ(batch_of(gcra, {{"+1", "", "1"}}),
            Error("floodgate: decision 1: '+' joins the previous item's group: none to join, or "
                  "the item is listed"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"+1", "", "1"}, {"+1", "", "1"}},
                     {"1", "1", "2", "all", "0", ""}),
            Error("floodgate: decision 2: '+' joins the previous item's group: none to join, or "
                  "the item is listed"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"1", "", "1"}, {"+1", "", "1"}},
                     {"1", "1", "2", "all", "0", ""}),
            Error("floodgate: decision 3: '+' joins the previous item's group: none to join, or "
                  "the item is listed"));
  {
    std::vector<std::array<std::string, 3>> seventeen(17, {"+1", "", "1"});
    seventeen[0][0] = "1";
    EXPECT_EQ(batch_of(gcra, seventeen),
              Error("floodgate: decision 17: a group takes at most 16 items"));
  }
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"1", "", "1e3"}}),
            Error("floodgate: decision 2: cost must be an integer in [0, 1000000000]"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"2", "", "1"}}),
            Error("floodgate: decision 2: policy number out of range"));
  // The cost "1" is known good by decision 3, its explicit now is not.
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"1", "", "1"}, {"1", "12x", "1"}}),
            Error("floodgate: decision 3: now must be empty or an integer count of microseconds"));
  EXPECT_EQ(batch_of(gcra, {{"1", "", "1"}, {"1", "", " 1"}}),
            Error("floodgate: decision 2: cost must be an integer in [0, 1000000000]"));
  // None of the refused batches decided anything.
  EXPECT_EQ(server_->Cli({"EXISTS", "args:k0", "args:k1", "args:k2"}), "0\n");

  EXPECT_EQ(batch_of({"1", "gcra", "30000", "1000000", "30000"}, {{"1", "", "1"}}),
            Error("floodgate: policy 1: gcra: period / limit rounded up to whole us slows the "
                  "rate by more than 0.1%"));
  EXPECT_EQ(batch_of({"1", "sl", "100001", "1000000", "100001"}, {{"1", "", "1"}}),
            Error("floodgate: policy 1: sliding_log limit must be at most 100000"));
  EXPECT_EQ(eval(single, {"1", "args:s", "gcra", "", "10", "1000000", "10", "-1"}),
            Error("floodgate: cost must be an integer in [0, 1000000000]"));
  EXPECT_EQ(eval(single, {"1", "args:s", "gcra", "", "10", "1000000", "10", "1"}),
            "1\n9\n0\n100000\n");
}

TEST_F(RedisTest, ScriptFlushLosesNoDecision) {
  auto store = OpenRedis(Url());
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:100000/1h");
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, decisions{0};
  std::jthread load([&] {
    for (int i = 0; i < 200'000 && !stop; ++i) {
      auto d = store->Decide({fmt::format("k{}", i % 100), policy, 1, std::nullopt});
      if (!d.ok() || d->degraded || !d->allowed) ++failures;
      ++decisions;
    }
  });
  while (decisions < 200) std::this_thread::yield();
  EXPECT_EQ(server_->Cli({"SCRIPT", "FLUSH"}), "OK\n");
  const int at_flush = decisions;
  while (decisions < at_flush + 200) std::this_thread::yield();
  stop = true;
  load.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(store->redis_stats().noscript_reloads, 1u);
}

TEST(RedisAuth, PasswordAndAclUser) {
  auto server = RedisServer::Start({"--requirepass", "s3cret"});
  ASSERT_NE(server, nullptr);
  // 10/h: the key then lives 6 min (10/s kept it 100 ms, which a redis-cli could outlast).
  const Policy policy = *Policy::Parse("gcra:10/1h");
  const std::string base = fmt::format("127.0.0.1:{}", server->port());

  // The timeout is a guard: a decision answered by on_error would not reach Redis.
  auto ok = OpenRedis("redis://:s3cret@" + base + "?timeout=60s");
  ASSERT_NE(ok, nullptr);
  EXPECT_TRUE(ok->Decide({"k", policy, 1, std::nullopt})->allowed);

  auto wrong = RedisStore::Open(*RedisStoreOptions::FromUrl("redis://:nope@" + base));
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(std::string(MessageOf(wrong.status())), HasSubstr("refused AUTH"));
  EXPECT_THAT(std::string(MessageOf(wrong.status())), HasSubstr("WRONGPASS"));
  EXPECT_THAT(std::string(MessageOf(wrong.status())), ::testing::Not(HasSubstr("nope")));

  auto none = RedisStore::Open(*RedisStoreOptions::FromUrl("redis://" + base));
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(MessageOf(none.status())), HasSubstr("needs a password"));

  server->Cli({"-a", "s3cret", "--no-auth-warning", "ACL", "SETUSER", "limiter", "on",
               ">pa:ss@word", "~*", "+@all"});
  auto user = OpenRedis("redis://limiter:pa%3Ass%40word@" + base + "/2?timeout=60s");
  ASSERT_NE(user, nullptr);
  EXPECT_TRUE(user->Decide({"k", policy, 1, std::nullopt})->allowed);
  EXPECT_EQ(server->Cli({"-a", "s3cret", "--no-auth-warning", "-n", "2", "EXISTS", "fg:gcra:k"}),
            "1\n");
}

// A reply announcing a huge array is refused before anything is allocated for it (hiredis
// would allocate the element table up front); ordinary replies still parse.
TEST(RespReader, RefusesHugeArraysAndReadsTheRest) {
  redis::ReplyReader reader;
  const auto feed = [&](std::string_view bytes) { return reader.Feed(bytes.data(), bytes.size()); };
  ASSERT_TRUE(feed("*2\r\n:1\r\n$2\r\nok\r\n").ok());
  auto reply = reader.Next();
  ASSERT_TRUE(reply.ok());
  ASSERT_NE(*reply, nullptr);
  EXPECT_EQ((*reply)->elements, 2u);
  ASSERT_TRUE(feed("*900000000\r\n").ok());
  auto huge = reader.Next();
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("900000000 elements"));
}

// Commands are formatted by our own code (resp.cc says why): byte for byte what hiredis's
// formatter makes, for random binary arguments of every length class.
TEST(RespFormat, SameBytesAsHiredis) {
  std::mt19937 random(7);
  for (int round = 0; round < 500; ++round) {
    std::vector<std::string> owned(std::uniform_int_distribution<int>(0, 12)(random));
    for (auto& arg : owned) {
      const int length_class = std::uniform_int_distribution<int>(0, 3)(random);
      const std::size_t size =
          length_class == 0   ? 0
          : length_class == 1 ? std::uniform_int_distribution<int>(1, 9)(random)
          : length_class == 2 ? std::uniform_int_distribution<int>(10, 200)(random)
                              : std::uniform_int_distribution<int>(1000, 70'000)(random);
      for (std::size_t i = 0; i < size; ++i) arg.push_back(static_cast<char>(random()));
    }
    std::vector<std::string_view> args(owned.begin(), owned.end());
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    char* theirs = nullptr;
    const int size =
        redisFormatCommandArgv(&theirs, static_cast<int>(argv.size()), argv.data(), lengths.data());
    ASSERT_GT(size, 0);
    std::string ours = "prefix";
    redis::AppendCommand(ours, args);
    EXPECT_EQ(ours, "prefix" + std::string(theirs, static_cast<std::size_t>(size))) << round;
    redisFreeCommand(theirs);
  }
}

TEST(RedisUrl, ParsesAndRejects) {
  auto o = RedisStoreOptions::FromUrl(
      "redis://u:p%40ss@[::1]:7000/3?timeout=20ms&on_error=fail_open&connections=4&batch=32");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->user, "u");
  EXPECT_EQ(o->password, "p@ss");
  EXPECT_EQ(o->host, "::1");
  EXPECT_EQ(o->port, 7000);
  EXPECT_EQ(o->db, 3);
  EXPECT_EQ(o->timeout, milliseconds(20));
  EXPECT_EQ(o->on_error, OnError::kFailOpen);
  EXPECT_EQ(o->connections, 4);
  EXPECT_EQ(o->connections_per_server(), 4);
  EXPECT_EQ(RedisStoreOptions::FromUrl("redis://h:1")->connections_per_server(), 2);
  EXPECT_EQ(o->max_batch, 32);
  // Every option that changes behaviour, when not the default; never the password.
  EXPECT_EQ(o->Describe(),
            "redis://u:***@[::1]:7000/3?timeout=20ms&on_error=fail_open&connections=4&batch=32");
  EXPECT_EQ(RedisStoreOptions::FromUrl("redis://h:1")->Describe(), "redis://h:1/0");
  for (const char* bad : {"redis://", "redis://h:0", "redis://h:70000", "redis://h:1/x",
                          "redis://h?timeout=5", "redis://h?on_error=maybe", "redis://h?batch=0",
                          "redis://h?colour=red", "http://h", "redis://%zz@h"}) {
    EXPECT_FALSE(RedisStoreOptions::FromUrl(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace floodgate::testing

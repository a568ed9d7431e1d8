// The Redis store on Redis Sentinel: its URL, finding the primary, failovers, wait_replicas.
#include <atomic>
#include <mutex>
#include <thread>

#include "failover_load.h"
#include "redis_test_fixture.h"
#include "store/redis/replicas.h"

namespace floodgate::testing {
namespace {

std::string SentinelUrlRefusal(const std::string& url) {
  auto options = RedisStoreOptions::FromUrl(url);
  return options.ok() ? "" : std::string(options.status().message());
}

TEST(RedisSentinelUrl, ParsesTheSentinelsTheMasterAndTheirCredentials) {
  auto o = RedisStoreOptions::FromUrl(
      "redis-sentinel://app:p%40ss@10.0.0.1:26380,10.0.0.2,[::1]:26381/my%20master?db=2&"
      "sentinel_user=watch&sentinel_password=s%26cret&wait_replicas=1&timeout=20ms");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->sentinel);
  EXPECT_FALSE(o->cluster);
  EXPECT_FALSE(o->tls);
  EXPECT_EQ(o->sentinel_master, "my master");
  ASSERT_EQ(o->seeds.size(), 3u);
  EXPECT_EQ(o->seeds[0], (RedisEndpoint{"10.0.0.1", 26380}));
  EXPECT_EQ(o->seeds[1], (RedisEndpoint{"10.0.0.2", 26379}));  // a sentinel's default port
  EXPECT_EQ(o->seeds[2], (RedisEndpoint{"::1", 26381}));
  EXPECT_EQ(o->user, "app");  // the primary's credentials
  EXPECT_EQ(o->password, "p@ss");
  EXPECT_EQ(o->sentinel_user, "watch");
  EXPECT_EQ(o->sentinel_password, "s&cret");
  EXPECT_EQ(o->db, 2);
  EXPECT_EQ(o->wait_replicas, 1);
  EXPECT_EQ(o->timeout, milliseconds(20));
  EXPECT_EQ(o->Describe(),
            "redis-sentinel://app:***@10.0.0.1:26380,10.0.0.2:26379,[::1]:26381/my master?db=2&"
            "timeout=20ms&wait_replicas=1&sentinel_user=watch");

  o = RedisStoreOptions::FromUrl("rediss-sentinel://h:1/fg?ca=/ca.pem&sni=redis.internal");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->tls);
  EXPECT_EQ(o->tls_server_name, "redis.internal");
  EXPECT_EQ(o->Describe(), "rediss-sentinel://h:1/fg?db=0&ca=/ca.pem&sni=redis.internal");
  EXPECT_TRUE(CheckStoreUrl("redis-sentinel://h:1/fg").ok());

  // wait_replicas applies to every form.
  o = RedisStoreOptions::FromUrl("redis://h:1?wait_replicas=2");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->wait_replicas, 2);
}

TEST(RedisSentinelUrl, RefusesWhatASentinelUrlCannotBe) {
  EXPECT_THAT(SentinelUrlRefusal("redis-sentinel://h:1"),
              HasSubstr("expected the master's name after the sentinels"));
  EXPECT_THAT(SentinelUrlRefusal("redis-sentinel://h:1/"),
              HasSubstr("expected the master's name after the sentinels"));
  EXPECT_THAT(SentinelUrlRefusal("redis-sentinel://h:1/fg/2"), HasSubstr("(the database is db=N)"));
  EXPECT_THAT(SentinelUrlRefusal("redis-sentinel:///fg"), HasSubstr("missing host"));
  EXPECT_THAT(SentinelUrlRefusal("redis-sentinel://h:0/fg"), HasSubstr("port must be 1-65535"));
  EXPECT_THAT(SentinelUrlRefusal("redis-sentinel://h:1/fg?db=x"),
              HasSubstr("database must be a number"));
  EXPECT_THAT(SentinelUrlRefusal("redis+sentinel://h:1/fg"),
              HasSubstr("Redis Sentinel is redis-sentinel://"));
  EXPECT_THAT(SentinelUrlRefusal("redis://h:1?sentinel_password=x"),
              HasSubstr("sentinel_password is for redis-sentinel://"));
  EXPECT_THAT(SentinelUrlRefusal("redis://h:1?wait_replicas=17"),
              HasSubstr("wait_replicas must be 0-16"));
  EXPECT_THAT(SentinelUrlRefusal("redis-sentinel://h:1/fg?nope=1"),
              HasSubstr("sentinel_user, sentinel_password"));
  EXPECT_THAT(SentinelUrlRefusal("redis-sentinel://h:1/fg?ca=/ca.pem"),
              HasSubstr("use rediss:// (or tls=1)"));
}

TEST(RedisSentinelOpen, SaysWhyNoPrimaryWasFound) {
  // A sentinel that monitors "fg" (on a port where nothing listens) knows no "nope".
  auto sentinel = RedisServer::StartSentinel("sentinel monitor fg 127.0.0.1 1 2\n");
  ASSERT_NE(sentinel, nullptr);
  auto options = RedisStoreOptions::FromUrl(
      fmt::format("redis-sentinel://127.0.0.1:{}/nope", sentinel->port()));
  ASSERT_TRUE(options.ok()) << options.status();
  auto store = RedisStore::Open(*options);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(
      std::string(store.status().message()),
      HasSubstr(fmt::format("127.0.0.1:{}: knows no primary named \"nope\"", sentinel->port())));

  // No sentinel answers at all: each one's reason.
  const int nobody = FreeLoopbackPort();
  options = RedisStoreOptions::FromUrl(fmt::format("redis-sentinel://127.0.0.1:{}/fg", nobody));
  ASSERT_TRUE(options.ok()) << options.status();
  store = RedisStore::Open(*options);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr(fmt::format("no sentinel named the primary of \"fg\" (127.0.0.1:{}: redis "
                                    "unreachable at 127.0.0.1:{}: connection refused",
                                    nobody, nobody)));

  // lazy_connect: open anyway, answer by on_error, and say why.
  options->lazy_connect = true;
  options->connect_timeout = milliseconds(200);
  options->on_error = OnError::kFailClosed;
  store = RedisStore::Open(*options);
  ASSERT_TRUE(store.ok()) << store.status();
  auto d = (*store)->Decide({"k", *Policy::Parse("fixed_window:10/1m"), 1, std::nullopt});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->degraded);
  EXPECT_FALSE(d->allowed);
  EXPECT_THAT(std::string((*store)->Health().message()), HasSubstr("connection refused"));
}

TEST(RedisSentinelOpen, NeverUsesAServerThatIsNotThePrimary) {
  // A sentinel told to monitor a replica names it as the primary; ROLE says otherwise,
  // and the store sends it nothing.
  auto primary = RedisServer::Start();
  ASSERT_NE(primary, nullptr);
  auto replica = RedisServer::Start({"--replicaof", "127.0.0.1", std::to_string(primary->port())});
  ASSERT_NE(replica, nullptr);
  auto sentinel = RedisServer::StartSentinel(
      fmt::format("sentinel monitor fg 127.0.0.1 {} 1\n", replica->port()));
  ASSERT_NE(sentinel, nullptr);
  auto options = RedisStoreOptions::FromUrl(
      fmt::format("redis-sentinel://127.0.0.1:{}/fg?connections=1", sentinel->port()));
  ASSERT_TRUE(options.ok()) << options.status();
  auto store = RedisStore::Open(*options);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr(fmt::format("redis at 127.0.0.1:{} is not the primary (ROLE: slave)",
                                    replica->port())));
  EXPECT_EQ(InfoField(replica->Cli({"INFO", "commandstats"}), "cmdstat_evalsha"), "");
}

// Issue 37: with wait_replicas=1 and no replica left, every decision timed out while the
// store called itself healthy ("decisions go to it again"). It is ready only while the
// primary says enough replicas are online (asked every second: waited for as events).
TEST(RedisWaitReplicas, ReadyOnlyWhileThePrimaryHasTheReplicasItWaitsFor) {
  auto primary = RedisServer::Start({"--repl-diskless-sync-delay", "0"});
  ASSERT_NE(primary, nullptr);
  auto store = OpenRedis(primary->url("wait_replicas=1&timeout=60s&on_error=fail_closed"));
  ASSERT_NE(store, nullptr);
  const auto until = [&](auto predicate) {
    const auto deadline = Steady::now() + kHangGuard;
    while (!predicate() && Steady::now() < deadline) std::this_thread::sleep_for(milliseconds(10));
    return predicate();
  };
  // No replica yet: connected, and not ready, saying why.
  ASSERT_TRUE(until([&] { return store->redis_stats().replicas_online == 0; }));
  EXPECT_FALSE(store->Health().ok());
  EXPECT_THAT(std::string(store->Health().message()),
              HasSubstr("wait_replicas=1: the primary at redis://127.0.0.1:"));
  EXPECT_THAT(std::string(store->Health().message()), HasSubstr("has 0 replica(s) online"));
  // A replica: ready once the primary counts it online.
  auto replica = RedisServer::Start({"--replicaof", "127.0.0.1", std::to_string(primary->port())});
  ASSERT_NE(replica, nullptr);
  ASSERT_TRUE(until([&] { return store->redis_stats().replicas_online == 1; }));
  EXPECT_TRUE(store->Health().ok()) << store->Health();
  std::string metrics;
  store->AppendMetrics(metrics);
  EXPECT_THAT(metrics, HasSubstr("floodgate_redis_replicas_online 1\n"));
  // It goes: not ready again.
  replica->Kill();
  ASSERT_TRUE(until([&] { return store->redis_stats().replicas_online == 0; }));
  EXPECT_FALSE(store->Health().ok());
  // Without wait_replicas nothing is watched.
  auto plain = OpenRedis(primary->url("timeout=60s"));
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->redis_stats().replicas_online, -1);
  EXPECT_TRUE(plain->Health().ok());
}

TEST(RedisReplicaInfo, CountsTheReplicasOnline) {
  EXPECT_EQ(redis::OnlineReplicas("# Replication\r\nrole:master\r\nconnected_slaves:2\r\n"
                                  "slave0:ip=10.0.0.2,port=6379,state=online,offset=9,lag=0\r\n"
                                  "slave1:ip=10.0.0.3,port=6379,state=wait_bgsave,offset=0,lag=0"
                                  "\r\nmaster_failover_state:no-failover\r\n"),
            1);
  EXPECT_EQ(redis::OnlineReplicas("role:master\r\nconnected_slaves:0\r\n"), 0);
  EXPECT_EQ(redis::OnlineReplicas("role:slave\r\nmaster_host:10.0.0.1\r\n"), -1);
}

// wait_replicas needs no Sentinel: a primary and its replica.
TEST(RedisWaitReplicas, AnswersOnlyWhatTheReplicasAcknowledged) {
  const std::vector<std::string> sync = {"--repl-diskless-sync-delay", "0"};
  auto primary = RedisServer::Start(sync);
  ASSERT_NE(primary, nullptr);
  auto replica = RedisServer::Start({"--replicaof", "127.0.0.1", std::to_string(primary->port())});
  ASSERT_NE(replica, nullptr);
  const auto synced_by = Steady::now() + kHangGuard;
  while (InfoField(replica->Cli({"INFO", "replication"}), "master_link_status") != "up" &&
         Steady::now() < synced_by) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_EQ(InfoField(replica->Cli({"INFO", "replication"}), "master_link_status"), "up");
  // Acknowledged writes: the timeout is only a guard here.
  auto store =
      OpenRedis(primary->url("wait_replicas=1&timeout=60s&on_error=fail_closed&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:1000/1h");
  for (int i = 1; i <= 50; ++i) {
    auto d = store->Decide({"acked", policy, 1, std::nullopt});
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_FALSE(d->degraded) << i;
    EXPECT_EQ(d->remaining, 1000 - i);
  }
  EXPECT_EQ(store->redis_stats().calls, 50u);

  // Without its replica, the primary still runs the script, but nothing acknowledges it,
  // however long the store waits: on_error answers once its timeout (short here) fires.
  auto unacked = OpenRedis(
      primary->url("wait_replicas=1&timeout=200ms&on_error=fail_closed&denial_cache=0us"));
  ASSERT_NE(unacked, nullptr);
  replica->Kill();
  for (int i = 0; i < 3; ++i) {
    auto d = unacked->Decide({"acked", policy, 1, std::nullopt});
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(d->degraded);
    EXPECT_FALSE(d->allowed);
  }
  EXPECT_GE(unacked->redis_stats().errors + unacked->redis_stats().timeouts, 3u);
}

// The longest time without an answer from Redis in `answers`, from `from` on.
Steady::duration LongestGapWithoutRedis(const std::vector<LoadAnswer>& answers,
                                        Steady::time_point from) {
  Steady::duration longest{};
  Steady::time_point last = from;
  for (const LoadAnswer& a : answers) {
    if (a.at < from || a.degraded) continue;
    longest = std::max(longest, a.at - last);
    last = a.at;
  }
  return longest;
}

long long Ms(Steady::duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }

class SentinelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setup_ = RedisSentinels::Start();
    ASSERT_NE(setup_, nullptr);
  }
  std::unique_ptr<RedisSentinels> setup_;
};

TEST_F(SentinelTest, FindsThePrimaryAndPassesTheConformanceVectors) {
  auto store = OpenRedis(setup_->url("batch=1&timeout=60s&prefix=vectors:"));
  ASSERT_NE(store, nullptr);
  ExpectVectorsOneCallPerDecision(*store);
  // Multi-decisions under delay= (lua/batch.lua wait_group), on the scripts Sentinel shares.
  const auto cases = LoadMultiVectors();
  for (std::size_t c = 0; c < cases.size(); ++c) {
    if (cases[c].file == "delay.json") RunMultiCase(*store, cases[c], fmt::format("md{}:", c));
  }
  EXPECT_TRUE(store->Ping());
  EXPECT_TRUE(store->Health().ok()) << store->Health();
  EXPECT_EQ(store->redis_stats().primary_switches, 0u);
}

// How long the store went without Redis is printed, not asserted: a loaded machine decides
// it as much as the store does.
TEST_F(SentinelTest, ASentinelFailoverUnderLoadResumesFromTheReplicatedCount) {
  auto store = OpenRedis(setup_->url("timeout=2s&on_error=fail_closed&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:1000000/1h");
  constexpr int kBefore = 200;
  for (int i = 1; i <= kBefore; ++i) {
    auto d = store->Decide({"hot", policy, 1, std::nullopt});
    ASSERT_TRUE(d.ok() && !d->degraded) << i;
  }
  ASSERT_TRUE(setup_->WaitReplicated(kHangGuard));
  const int old_port = setup_->PrimaryPort();
  ASSERT_NE(setup_->ServerOn(old_port), nullptr);
  const int new_port = setup_->servers()[0]->port() == old_port ? setup_->servers()[1]->port()
                                                                : setup_->servers()[0]->port();

  FailoverLoad load(*store, policy);
  const auto started = Steady::now();
  ASSERT_TRUE(load.WaitFor(
      started, [](const LoadAnswer& a) { return !a.degraded; }, kHangGuard));
  const auto failover_at = Steady::now();
  EXPECT_THAT(setup_->sentinels()[0]->Cli({"SENTINEL", "FAILOVER", "fg"}), HasSubstr("OK"));
  ASSERT_TRUE(setup_->WaitPrimary(new_port, kHangGuard));
  // The store followed, and Redis answers again (from the new primary).
  const auto switched_by = Steady::now() + kHangGuard;
  while (store->redis_stats().primary_switches == 0 && Steady::now() < switched_by) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_EQ(store->redis_stats().primary_switches, 1u);
  // Moved when the leader announced the promotion, not at +switch-master.
  EXPECT_EQ(store->redis_stats().early_switches, 1u);
  const auto switched_at = Steady::now();
  ASSERT_TRUE(load.WaitFor(
      switched_at, [](const LoadAnswer& a) { return !a.degraded; }, kHangGuard));
  const std::vector<LoadAnswer> answers = load.Stop();

  const Steady::duration gap = LongestGapWithoutRedis(answers, failover_at);
  std::printf(
      "SENTINEL FAILOVER under load: %zu answers, the store followed %lld ms after the "
      "command, longest time without Redis %lld ms\n",
      answers.size(), Ms(switched_at - failover_at), Ms(gap));
  for (const LoadAnswer& a : answers) {
    // fail_closed: a degraded answer denies; Redis's answers all admit (a write, which a
    // replica would refuse with READONLY: no answer came from one)...
    EXPECT_EQ(a.allowed, !a.degraded);
    // ...and count on from what was replicated before the failover, never from zero.
    if (!a.degraded) {
      EXPECT_GT(a.counted, kBefore);
    }
  }
  // The new primary holds the count (a decision now counts on from the last ones).
  auto after = store->Decide({"hot", policy, 1, std::nullopt});
  ASSERT_TRUE(after.ok() && !after->degraded);
  std::int64_t last_counted = 0;
  for (const LoadAnswer& a : answers) {
    if (!a.degraded && a.at > switched_at) last_counted = std::max(last_counted, a.counted);
  }
  EXPECT_GT(policy.limit - after->remaining, last_counted);
  // Issue 37: acknowledged decisions (Redis's answers) the new primary does not hold were
  // lost: the old primary's after the replica left it. Moving at +switch-master lost
  // thousands (every decision of the ~0.7 s before it); at the promotion's announcement
  // only what the last replication did not carry can be.
  const std::int64_t acknowledged = kBefore + 1 + Acknowledged(answers);  // and `after`
  const std::int64_t held = policy.limit - after->remaining;
  std::printf("acknowledged %lld, held by the new primary %lld: lost %lld\n",
              static_cast<long long>(acknowledged), static_cast<long long>(held),
              static_cast<long long>(acknowledged - held));
  EXPECT_LE(acknowledged - held, 100);
}

TEST_F(SentinelTest, APrimaryDemotedUnderALiveConnectionNeverAnswersEvenADenial) {
  auto store = OpenRedis(setup_->url("timeout=2s&on_error=fail_closed&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:1/1h");
  auto d = store->Decide({"full", policy, 1, std::nullopt});
  ASSERT_TRUE(d.ok() && d->allowed && !d->degraded);
  d = store->Decide({"full", policy, 1, std::nullopt});
  ASSERT_TRUE(d.ok() && !d->allowed && !d->degraded);  // Redis's denial
  ASSERT_TRUE(setup_->WaitReplicated(kHangGuard));
  // Demoted by hand, not by a sentinel: REPLICAOF keeps its clients connected, and a
  // denial writes nothing, so no READONLY would tell.
  RedisServer* old_primary = setup_->ServerOn(setup_->PrimaryPort());
  ASSERT_NE(old_primary, nullptr);
  RedisServer* other = setup_->servers()[0].get() == old_primary ? setup_->servers()[1].get()
                                                                 : setup_->servers()[0].get();
  EXPECT_THAT(other->Cli({"REPLICAOF", "NO", "ONE"}), HasSubstr("OK"));
  EXPECT_THAT(old_primary->Cli({"REPLICAOF", "127.0.0.1", std::to_string(other->port())}),
              HasSubstr("OK"));
  ASSERT_EQ(InfoField(old_primary->Cli({"INFO", "replication"}), "role"), "slave");
  // The sentinels still name the old primary (they poll INFO every 10 s): nothing answers
  // from Redis, and above all not the replica with its denial.
  for (int i = 0; i < 20; ++i) {
    d = store->Decide({"full", policy, 1, std::nullopt});
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_TRUE(d->degraded) << i;
  }
}

// How soon after the promotion Redis answers again is printed, not asserted.
TEST_F(SentinelTest, AKilledPrimaryDegradesThenRecoversAfterThePromotion) {
  auto store = OpenRedis(setup_->url("timeout=300ms&on_error=fail_closed&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("fixed_window:1000000/1h");
  ASSERT_TRUE(TimeUntilRedisAnswers(*store, "hot", policy, kHangGuard).has_value());
  const int old_port = setup_->PrimaryPort();
  RedisServer* old_primary = setup_->ServerOn(old_port);
  ASSERT_NE(old_primary, nullptr);

  FailoverLoad load(*store, policy);
  ASSERT_TRUE(load.WaitFor(
      Steady::now(), [](const LoadAnswer& a) { return !a.degraded; }, kHangGuard));
  old_primary->Kill();
  const auto killed_at = Steady::now();
  // on_error answers while there is no primary...
  const auto degraded_at = load.WaitFor(
      killed_at, [](const LoadAnswer& a) { return a.degraded && !a.allowed; }, kHangGuard);
  ASSERT_TRUE(degraded_at.has_value());
  // ...until a sentinel is told to promote the replica (the sentinels would take the
  // primary for down only after down-after, a minute here)...
  EXPECT_THAT(setup_->sentinels()[0]->Cli({"SENTINEL", "FAILOVER", "fg"}), HasSubstr("OK"));
  const auto promoted_by = Steady::now() + kHangGuard;
  while (setup_->PrimaryPort() == old_port && Steady::now() < promoted_by) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_NE(setup_->PrimaryPort(), old_port) << "no failover";
  const auto promoted_at = Steady::now();
  // ...and the store follows: Redis answers again.
  const auto recovered_at = load.WaitFor(
      *degraded_at, [](const LoadAnswer& a) { return !a.degraded; }, kHangGuard);
  const std::vector<LoadAnswer> answers = load.Stop();
  ASSERT_TRUE(recovered_at.has_value()) << "Redis did not answer again after the promotion";
  std::printf("primary killed: promoted after %lld ms, Redis answered again %lld ms after that\n",
              Ms(promoted_at - killed_at), Ms(*recovered_at - promoted_at));
  for (const LoadAnswer& a : answers) EXPECT_EQ(a.allowed, !a.degraded);
  EXPECT_EQ(store->redis_stats().primary_switches, 1u);
  EXPECT_TRUE(store->Health().ok()) << store->Health();
}

}  // namespace
}  // namespace floodgate::testing

// Failovers counted (issue 37): Redis Cluster's planned failover and a stopped primary under
// load, wait_replicas on a cluster's primaries, and Sentinel with wait_replicas and a second
// replica. Each counts acknowledged decisions against what the new primary holds.
#include <floodgate/redis_store.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <thread>

#include "failover_load.h"
#include "redis_server.h"
#include "redis_test_fixture.h"
#include "store/redis/cluster.h"

namespace floodgate::testing {
namespace {

// floodgate's key for `key` under fixed_window with the default prefix "fg:".
std::string StoredFixedWindowKey(const std::string& key) { return "fg:fw:" + key; }

// Polls `predicate` until it holds (kHangGuard: a hang guard, not a budget).
bool Eventually(const std::function<bool()>& predicate) {
  const auto deadline = Steady::now() + kHangGuard;
  while (!predicate() && Steady::now() < deadline) std::this_thread::sleep_for(milliseconds(10));
  return predicate();
}

// What the primary holds for `key` (limit - remaining of a cost-0 decision Redis answered).
std::int64_t Held(Store& store, const Policy& policy, const std::string& key) {
  std::optional<Decision> peek;
  Eventually([&] {
    auto d = store.Decide({key, policy, 0, std::nullopt});
    if (d.ok() && !d->degraded) peek = *d;
    return peek.has_value();
  });
  if (!peek) {
    ADD_FAILURE() << "Redis never answered the count of " << key;
    return -1;
  }
  return policy.limit - peek->remaining;
}

std::string IdOf(RedisServer& node) {
  std::string id = node.Cli({"CLUSTER", "MYID"});
  while (!id.empty() && (id.back() == '\n' || id.back() == '\r')) id.pop_back();
  return id;
}

// Ready for CLUSTER FAILOVER: the replica has synced, every node takes it for `primary`'s
// and all have heard of the same current epoch. Each was seen to make the failover say OK
// and then time out in Redis: a replica still in its first sync cannot catch up within the
// manual failover's 5 s; a primary ignores a request from a node it does not (yet) take for
// its replica; and a primary refuses its vote to a replica behind its epoch, Redis retrying
// the election only after twice the node timeout (2 x kHangGuard here). A cluster just
// formed, under a loaded make test, may still be gossiping the last two ("Waiting for
// votes, but majority still not reached").
bool ReadyForFailover(RedisCluster& cluster, RedisServer& primary, RedisServer& replica) {
  if (replica.Cli({"INFO", "replication"}).find("master_link_status:up") == std::string::npos) {
    return false;
  }
  const std::string replica_line = IdOf(replica) + " ";
  // "slave <id>" or, on the replica itself, "myself,slave <id>".
  const std::string its_primary = "slave " + IdOf(primary);
  std::string epoch;
  for (const auto& node : cluster.nodes()) {
    if (node == nullptr) continue;
    const std::string info = node->Cli({"CLUSTER", "INFO"});
    const std::size_t at = info.find("cluster_current_epoch:");
    if (at == std::string::npos) return false;
    const std::string mine = info.substr(at, info.find('\n', at) - at);
    if (!epoch.empty() && mine != epoch) return false;
    epoch = mine;
    const std::string nodes = node->Cli({"CLUSTER", "NODES"});
    const std::size_t line = nodes.find(replica_line);
    if (line == std::string::npos ||
        nodes.substr(line, nodes.find('\n', line) - line).find(its_primary) == std::string::npos) {
      return false;
    }
  }
  return true;
}

// After `what`: every decision Redis acknowledged is held by the primary now. A degraded
// answer may still have been counted by Redis (a call that ran late): the count may exceed
// what was acknowledged, never fall short of it. The counts are printed.
void ExpectNothingAcknowledgedLost(const char* what, const std::vector<LoadAnswer>& answers,
                                   Store& store, const Policy& policy) {
  std::int64_t degraded = 0;
  for (const LoadAnswer& a : answers) degraded += a.degraded ? 1 : 0;
  const std::int64_t acknowledged = Acknowledged(answers);
  const std::int64_t held = Held(store, policy, "hot");
  std::printf("%s: %zu answers, %lld degraded, acknowledged %lld, held by the new primary %lld\n",
              what, answers.size(), static_cast<long long>(degraded),
              static_cast<long long>(acknowledged), static_cast<long long>(held));
  EXPECT_LE(acknowledged, held) << "acknowledged decisions lost in " << what;
}

// The shared cluster, a store on it, and the primary of the key "hot" with its replica.
class ClusterFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = RedisCluster::Shared();
    ASSERT_NE(cluster_, nullptr);
    store_ = OpenRedis(cluster_->url("timeout=2s&on_error=fail_closed&denial_cache=0us"));
    ASSERT_NE(store_, nullptr);
    victim_ = cluster_->PrimaryOf(slot_);
    ASSERT_NE(victim_, nullptr);
    replica_ = cluster_->ReplicaOf(*victim_);
    ASSERT_NE(replica_, nullptr);
  }
  const Policy policy_ = *Policy::Parse("fixed_window:1000000/1h");
  const int slot_ = redis::SlotOf(StoredFixedWindowKey("hot"));
  RedisCluster* cluster_ = nullptr;
  std::unique_ptr<RedisStore> store_;
  RedisServer* victim_ = nullptr;
  RedisServer* replica_ = nullptr;
};

// CLUSTER FAILOVER (the planned one): the primary holds its clients' writes from the moment
// its replica asks until the replica has replicated everything and taken over; the held
// calls then answer MOVED (nothing ran), which the store follows. Nothing the old primary
// acknowledged is missing on the new one: the bound is 0 (docs/stores.md).
TEST_F(ClusterFailoverTest, APlannedClusterFailoverUnderLoadLosesNoAcknowledgedDecision) {
  RedisStore* store = store_.get();
  const Policy& policy = policy_;
  const int slot = slot_;
  RedisServer* victim = victim_;
  RedisServer* replica = replica_;

  FailoverLoad load(*store, policy);
  ASSERT_TRUE(load.WaitFor(
      Steady::now(), [](const LoadAnswer& a) { return !a.degraded; }, kHangGuard));
  ASSERT_TRUE(Eventually([&] { return ReadyForFailover(*cluster_, *victim, *replica); }));
  EXPECT_EQ(replica->Cli({"CLUSTER", "FAILOVER"}), "OK\n");
  ASSERT_TRUE(Eventually([&] { return cluster_->PrimaryOf(slot) == replica; }))
      << "the replica's log:\n"
      << replica->Log() << "\nthe primary's log:\n"
      << victim->Log();
  // The store was redirected from the demoted primary, and Redis answers after that.
  ASSERT_TRUE(Eventually([&] { return store->redis_stats().moved > 0; }));
  const auto moved_at = Steady::now();
  ASSERT_TRUE(load.WaitFor(
      moved_at, [](const LoadAnswer& a) { return !a.degraded; }, kHangGuard));
  const std::vector<LoadAnswer> answers = load.Stop();

  ExpectNothingAcknowledgedLost("CLUSTER FAILOVER under load", answers, *store, policy);
}

// A primary that stops (SIGSTOP: its connections stay up, nothing answers) while its
// replica takes over: the decisions that time out on it make the store look at the slot
// map again, asking a node that is not silent, so it follows the promotion at once instead
// of after the stall check (20 timeouts, 40 s here) takes the connection for dead and
// reconnects (issue 37: a pause past cluster-node-timeout).
TEST_F(ClusterFailoverTest, AStoppedPrimaryIsLeftForItsPromotedReplicaWithoutReconnecting) {
  RedisStore* store = store_.get();
  const Policy& policy = policy_;
  RedisServer* victim = victim_;
  RedisServer* replica = replica_;
  ASSERT_TRUE(TimeUntilRedisAnswers(*store, "hot", policy, kHangGuard).has_value());
  const auto reconnects = store->redis_stats().reconnects;

  victim->Pause();
  struct Resumed {
    RedisServer* server;
    ~Resumed() { server->Resume(); }
  } resumed{victim};
  // The nodes would take the victim for failed only after the node timeout (a minute
  // here): the replica is told to take over without its primary's consent.
  EXPECT_EQ(replica->Cli({"CLUSTER", "FAILOVER", "TAKEOVER"}), "OK\n");
  ASSERT_TRUE(TimeUntilRedisAnswers(*store, "hot", policy, kHangGuard).has_value());
  EXPECT_EQ(store->redis_stats().reconnects, reconnects)
      << "the store found the new primary only once the stopped one's connection was dropped";
  EXPECT_GT(store->redis_stats().timeouts, 0u);
}

// wait_replicas on a cluster: each primary's replicas are watched, and the store is ready
// only while every primary has the replicas WAIT needs (issue 37).
TEST_F(ClusterFailoverTest, WaitReplicasIsReadyOnlyWhileEveryPrimaryHasItsReplicas) {
  auto store =
      OpenRedis(cluster_->url("wait_replicas=1&timeout=60s&on_error=fail_closed&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Eventually([&] { return store->redis_stats().replicas_online == 1; }));
  EXPECT_TRUE(store->Health().ok()) << store->Health();
  std::string metrics;
  store->AppendMetrics(metrics);
  EXPECT_THAT(metrics, HasSubstr("floodgate_redis_replicas_online 1\n"));
  const Policy policy = *Policy::Parse("fixed_window:1000/1h");
  auto d = store->Decide({"hot", policy, 1, std::nullopt});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->degraded);  // WAIT 1 was met

  RedisServer* primary = victim_;
  replica_->Kill();
  ASSERT_TRUE(Eventually([&] { return store->redis_stats().replicas_online == 0; }));
  EXPECT_FALSE(store->Health().ok());
  EXPECT_THAT(std::string(store->Health().message()), HasSubstr("has 0 replica(s) online"));
  EXPECT_THAT(std::string(store->Health().message()),
              HasSubstr(fmt::format("127.0.0.1:{}", primary->port())));
}

// wait_replicas=1 with the second replica docs/stores.md asks for: every answer from Redis
// was on a replica when it came, the sentinels promote the replica that has the most of the
// stream, and the store leaves the old primary at the promotion's announcement, ~a
// sentinel tick before the replica stops replicating. A planned failover loses nothing.
TEST(SentinelWaitReplicas, APlannedFailoverWithASecondReplicaLosesNoAcknowledgedDecision) {
  auto setup = RedisSentinels::Start(2);
  ASSERT_NE(setup, nullptr);
  auto store =
      OpenRedis(setup->url("wait_replicas=1&timeout=2s&on_error=fail_closed&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Eventually([&] { return store->Health().ok(); })) << store->Health();
  const Policy policy = *Policy::Parse("fixed_window:1000000/1h");
  const int old_port = setup->PrimaryPort();

  FailoverLoad load(*store, policy);
  ASSERT_TRUE(load.WaitFor(
      Steady::now(), [](const LoadAnswer& a) { return !a.degraded; }, kHangGuard));
  EXPECT_THAT(setup->sentinels()[0]->Cli({"SENTINEL", "FAILOVER", "fg"}), HasSubstr("OK"));
  ASSERT_TRUE(Eventually([&] { return store->redis_stats().primary_switches == 1; }));
  EXPECT_EQ(store->redis_stats().early_switches, 1u);
  const auto switched_at = Steady::now();
  // The new primary answers once its remaining replica acknowledges (reconfigured by the
  // sentinels: until then WAIT times out, and on_error answers).
  ASSERT_TRUE(load.WaitFor(
      switched_at, [](const LoadAnswer& a) { return !a.degraded; }, kHangGuard));
  const std::vector<LoadAnswer> answers = load.Stop();
  EXPECT_NE(setup->PrimaryPort(), old_port);

  ExpectNothingAcknowledgedLost("SENTINEL FAILOVER, wait_replicas=1, 2 replicas", answers, *store,
                                policy);
}

}  // namespace
}  // namespace floodgate::testing

#pragma once

// Redis Sentinel: which server is the primary now (asked, confirmed, followed on failover).

#include <absl/status/status.h>
#include <floodgate/redis_store.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/redis/connection.h"
#include "store/redis/topology.h"

namespace floodgate::redis {

// Asks the sentinels in turn for the primary (SENTINEL GET-MASTER-ADDR-BY-NAME), makes a
// node for it (whose connections confirm it with ROLE) and sends every decision there, and
// asks again when the primary is lost: a sentinel announces +switch-master, a connection
// drops, or a call is refused READONLY (docs/stores.md, "Redis Sentinel"). Every call is
// followed by WAIT (replicas.h), which a demoted primary refuses.
class SentinelTopology final : public Topology {
 public:
  explicit SentinelTopology(const TopologyParts& parts);

  // Connects to every sentinel: one connection to ask, one subscribed to +switch-master.
  void Start() override;
  // Succeeds once a connection to the primary a sentinel named is ready; fails when none
  // did (startup.h).
  absl::Status WaitStarted() override;
  void Dispatch(UnitPtr unit, Steady::time_point now) override;
  // One server holds every key: a multi-decision is one call.
  int SlotOf(std::string_view) const override { return 0; }
  std::vector<Node*> Primaries() override;
  absl::Status Health() override { return HealthWithReplicas(primary()); }
  void AppendMetrics(const RedisStats& stats, std::string& out) const override;

 private:
  struct Sentinel {
    RedisEndpoint endpoint;
    std::unique_ptr<Connection> asks;     // SENTINEL GET-MASTER-ADDR-BY-NAME
    std::unique_ptr<Connection> listens;  // SUBSCRIBE +switch-master
    bool failed = false;                  // a connection attempt has failed
    std::string last_error;
  };

  // The node decisions go to; nullptr until a sentinel named one. Any thread.
  Node* primary() const { return primary_.load(std::memory_order_acquire); }
  // AUTH (or PING), SELECT, ROLE (the server a sentinel named must still be the primary),
  // the scripts.
  std::vector<HandshakeStep> HandshakeOf(Lane& lane) override;
  absl::Status NotConnected(const Node& node) override;
  // A call's error reply: READONLY, or WAIT refused, means the primary was demoted under
  // us. The error answers the call (on_error).
  bool Redirected(Lane& lane, std::string_view error, std::vector<UnitPtr>& chunk) override;
  void LaneReady(Lane& lane) override;
  // A connection of the primary went down: the sentinels are asked again.
  void LaneDown(Lane& lane, const absl::Status& status) override;
  // Closing: no more asking; the sentinels' connections stop.
  void Stop() override;

  std::unique_ptr<Connection> Connect(std::size_t index, bool listen);
  void Discover();
  void StartRound();
  void AskFrom(std::size_t index);
  void OnAnswer(std::size_t index, absl::StatusOr<Reply> reply);
  void EndRound(bool found);
  void OnMessage(const redisReply& message);
  void SwitchTo(const RedisEndpoint& endpoint);

  // Sentinel's events (sentinel.c): the leader about to promote a replica, and a failover
  // given up because the replica did not become a primary in time.
  static constexpr std::string_view kPromotionEvent = "+failover-state-send-slaveof-noone";
  static constexpr std::string_view kAbortEvent = "-failover-abort-slave-timeout";
  // How long, after kPromotionEvent, a sentinel naming the old primary is not followed back
  // to it (the replica says master within milliseconds of the event; the bound ends a wait
  // for a promotion whose abort we did not hear).
  static constexpr std::chrono::seconds kPromotionWait{10};

  std::atomic<Node*> primary_{nullptr};
  Steady::time_point promoting_until_{};  // kPromotionEvent heard: see kPromotionWait
  std::vector<Sentinel> sentinels_;
  boost::asio::steady_timer round_timer_;  // the next round, when asked again too soon
  boost::asio::steady_timer ask_timer_;    // bounds one sentinel's answer
  bool asking_ = false;
  bool ask_again_ = false;  // asked for while a round was on: another follows it
  bool round_scheduled_ = false;
  bool round_settled_ = true;  // every sentinel was asked, or has failed to connect
  std::uint64_t ask_generation_ = 0;
  Steady::time_point last_round_{};
  std::vector<std::string> round_errors_;
  bool found_ = false;         // a sentinel named a primary once: start-up is over
  RedisEndpoint left_{"", 0};  // the primary we moved away from last
  bool stopped_ = false;
};

}  // namespace floodgate::redis

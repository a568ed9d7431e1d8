#pragma once

// Redis Sentinel only: which server is the primary now (asked, confirmed, followed on failover).

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
#include "store/redis/counters.h"
#include "store/redis/dispatch.h"
#include "store/redis/node.h"
#include "store/redis/startup.h"
#include "store/redis/unit.h"

namespace floodgate::redis {

// Asks the sentinels in turn for the primary (SENTINEL GET-MASTER-ADDR-BY-NAME), hands the
// store a node for it (whose connections confirm it with ROLE), and asks again when the
// primary is lost: a sentinel announces +switch-master, a connection drops, or a call is
// refused READONLY (docs/stores.md, "Redis Sentinel"). primary() is read on any thread;
// everything else runs on the I/O thread.
class SentinelRouter {
 public:
  SentinelRouter(boost::asio::io_context& io, const RedisStoreOptions& options,
                 boost::asio::ssl::context* tls, Startup& startup, Counters& counters,
                 NodeSource& nodes);

  // Connects to every sentinel: one connection to ask, one subscribed to +switch-master.
  void Start();
  // Closing: no more asking; the sentinels' connections stop.
  void Stop();
  // The node decisions go to; nullptr until a sentinel named one. Any thread.
  Node* primary() const { return primary_.load(std::memory_order_acquire); }
  // A connection of `lane`'s node went down: if that is the primary, ask again.
  void OnLaneDown(Lane& lane);
  // A call's error reply: READONLY, or WAIT refused, means the primary was demoted under
  // us.
  void OnCallError(Lane& lane, std::string_view error);

 private:
  struct Sentinel {
    RedisEndpoint endpoint;
    std::unique_ptr<Connection> asks;     // SENTINEL GET-MASTER-ADDR-BY-NAME
    std::unique_ptr<Connection> listens;  // SUBSCRIBE +switch-master
    bool failed = false;                  // a connection attempt has failed
    std::string last_error;
  };

  std::unique_ptr<Connection> Connect(std::size_t index, bool listen);
  void Discover();
  void StartRound();
  void AskFrom(std::size_t index);
  void OnAnswer(std::size_t index, absl::StatusOr<Reply> reply);
  void EndRound(bool found);
  void OnMessage(const redisReply& message);
  void SwitchTo(const RedisEndpoint& endpoint);

  boost::asio::io_context& io_;
  const RedisStoreOptions& options_;
  boost::asio::ssl::context* tls_;
  Startup& startup_;
  Counters& counters_;
  NodeSource& nodes_;
  std::atomic<Node*> primary_{nullptr};
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

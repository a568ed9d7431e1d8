#pragma once

// wait_replicas: a script call answered only once WAIT says enough replicas have its writes.

#include <absl/functional/any_invocable.h>
#include <absl/status/status.h>
#include <floodgate/redis_store.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <mutex>
#include <string>
#include <string_view>

#include "store/redis/connection.h"

namespace floodgate::redis {

// Sends `call`, then WAIT <options.wait_replicas> <timeout> in the same write, and hands
// `handler` the call's reply once WAIT has answered: an error (Unavailable) instead when
// fewer replicas acknowledged it, so that every answer not degraded survives a failover;
// WAIT's own error when it refused (a replica does: Redis Sentinel sends WAIT 0 behind
// every call so that even a denial, which writes nothing, is never taken from a server
// demoted under a live connection). docs/stores.md, "Redis Sentinel". I/O thread.
void SendAcknowledged(Connection& connection, std::string_view call,
                      const RedisStoreOptions& options, std::string_view describe,
                      ReplyHandler handler);

class Node;

// The replicas online at a primary (its INFO replication, `slaveN:...,state=online`), or -1
// when the reply holds none of that (not a primary's INFO). Pure.
int OnlineReplicas(std::string_view info);

// wait_replicas=N: how many replicas the primary has online, asked every second, so that the
// store is not ready while WAIT cannot be met: at start while replication settles (each
// decision would wait out the timeout and be answered by on_error), and after a failover
// that left the new primary fewer replicas (issue 37: with one replica, the promoted one had
// none and every WAIT timed out). Said in the log at each change, in Health() and
// RedisStats::replicas_online. One per primary: a cluster keeps one for each primary of
// its slot map (cluster_router.h). I/O thread, but Health and online (any thread).
class ReplicaWatch {
 public:
  static constexpr std::chrono::seconds kInterval{1};

  // `primary` names the server to ask now (nullptr: none known yet).
  ReplicaWatch(boost::asio::io_context& io, int needed, absl::AnyInvocable<Node*()> primary);
  void Start();
  void Stop();
  // Asks now (a connection to the primary just became ready), and every kInterval after.
  void AskNow() { Ask(); }
  // The primary changed: nothing is known of the new one's replicas until it says.
  void Forget() { online_.store(-1, std::memory_order_relaxed); }
  // OK once the primary last reported `needed` replicas online; else why not.
  absl::Status Health() const;
  int online() const { return online_.load(std::memory_order_relaxed); }

 private:
  void Ask();
  void Record(int online, const std::string& where);

  boost::asio::steady_timer timer_;
  const int needed_;
  absl::AnyInvocable<Node*()> primary_;
  std::atomic<int> online_{-1};  // -1: not known yet
  bool stopped_ = false;
  mutable std::mutex mu_;
  std::string where_;  // guarded by mu_: the server that reported `online_`
};

}  // namespace floodgate::redis

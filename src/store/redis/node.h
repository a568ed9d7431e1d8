#pragma once

// A lane (one connection and what queues for it) and a node (a server: its lanes, its breaker).
//
// Each part has one writer: a lane's connection state is the lane's own (its connection's
// hooks), its queue, calls out and deadlines the batcher's (batcher.h: Enqueue, Stage, Watch,
// Drain); a node's lanes and whether it is retired are the node's. The topology that made
// a node hears what its lanes go through (LaneEvents) and keeps what only it needs of a
// node beside it (a cluster's: cluster_router.h).

#include <absl/status/status.h>
#include <floodgate/redis_store.h>
#include <fmt/format.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "store/redis/breaker.h"
#include "store/redis/connection.h"
#include "store/redis/scripts.h"
#include "store/redis/unit.h"

namespace floodgate::redis {

class Lane;

// Whether a connection that went down had been ready (else an attempt failed).
enum class LaneWas : std::uint8_t { kConnecting, kReady };

// What a lane's connection goes through, told to the topology that made its node, and
// what it asks it. I/O thread.
class LaneEvents {
 public:
  // What a new connection sends first (AUTH, SCRIPT LOAD, ...), each command with the
  // check of its answer (scripts.h).
  virtual std::vector<HandshakeStep> HandshakeOf(Lane& lane) = 0;
  virtual void OnLaneReady(Lane& lane) = 0;
  virtual void OnLaneDown(Lane& lane, const absl::Status& status, LaneWas was) = 0;

 protected:
  ~LaneEvents() = default;
};

// One connection to a server and what queues for it. The queue is filled by any thread
// and drained on the I/O thread.
class Lane {
 public:
  // The connection, not started.
  Lane(boost::asio::io_context& io, Node& node, ConnectionOptions options, Batching batching,
       LaneEvents& events);
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  Node& node;
  const std::unique_ptr<Connection> connection;

  // The connection has finished its handshake and not failed since. Any thread.
  bool ready() const { return ready_.load(std::memory_order_relaxed); }
  // I/O thread: how many times a connection attempt, or the connection, has failed.
  std::uint64_t failures() const { return failures_; }
  // I/O thread: what its batches may span, as its handshake found (scripts.h).
  Batching batching() const { return batching_; }
  void set_batching(Batching batching) { batching_ = batching; }
  // I/O thread: stops its connection for good. Its calls in flight fail with `reason` when
  // one is given (then on_error answers them), else are cancelled.
  void Stop(const std::optional<absl::Status>& reason);

 private:
  friend class Batcher;  // the queue, the calls out, the deadlines and the sweep are its
  struct Queue {
    explicit Queue(boost::asio::io_context& io) : sweep(io) {}
    // Filled by any thread, drained by the batcher's Flush on the I/O thread.
    std::mutex mu;
    std::deque<UnitPtr> queued;
    bool flush_posted = false;
    // I/O thread only: script calls sent and not yet answered, and whether Flush left
    // decisions queued because enough calls were out (see Batcher::kCallsOutWhenBatching).
    int calls_out = 0;
    bool holding = false;
    // I/O thread only: decisions sent (or waiting for this lane's node), oldest first, for
    // the timeout sweep.
    std::deque<UnitPtr> deadlines;
    boost::asio::steady_timer sweep;
    bool sweeping = false;
  };

  void OnReady();
  void OnDown(const absl::Status& status);

  LaneEvents& events_;
  std::atomic<bool> ready_{false};
  std::uint64_t failures_ = 0;
  Batching batching_;
  Queue queue_;
};

// A node's part in its topology: a server decisions go to, or a Redis Cluster seed, only
// asked for the slot map.
enum class NodeRole : std::uint8_t { kServer, kSeed };

// A Redis server: the standalone one, Sentinel's primary, or one cluster primary (or
// seed). Its breaker opens on its own failures only, so a node that is down degrades only
// its keys.
class Node {
 public:
  Node(RedisEndpoint endpoint, std::string describe, int threshold,
       std::chrono::microseconds open_for, NodeRole role = NodeRole::kServer)
      : endpoint(std::move(endpoint)),
        describe(std::move(describe)),
        role(role),
        breaker(threshold, open_for) {}
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const RedisEndpoint endpoint;
  const std::string describe;  // for messages
  const NodeRole role;
  // Fed by the outcomes of the units it admitted. Thread-safe.
  Breaker breaker;

  // Its connections, made once by its topology before the node is shared.
  void AddLanes(boost::asio::io_context& io, const ConnectionOptions& options, int count,
                Batching batching, LaneEvents& events);
  const std::vector<std::unique_ptr<Lane>>& lanes() const { return lanes_; }
  // A ready connection, round-robin; nullptr when none is. Thread-safe.
  Lane* PickLane() const;

  // I/O thread.
  void Start();
  // Closing: every connection stops.
  void Stop();
  // Out of its topology for good (an old primary): its connections stop (see Lane::Stop),
  // and it is never routed to again.
  void Retire(const std::optional<absl::Status>& reason);
  bool retired() const { return retired_; }

 private:
  std::vector<std::unique_ptr<Lane>> lanes_;
  mutable std::atomic<std::size_t> next_lane_{0};
  bool retired_ = false;
};

inline absl::Status NotConnectedError(const Node& node) {
  return absl::UnavailableError(fmt::format("redis at {} is not connected", node.describe));
}

}  // namespace floodgate::redis

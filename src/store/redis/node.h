#pragma once

// A lane (a connection, its queue, its deadlines) and a node (a server: lanes, breaker).

#include <absl/status/status.h>
#include <floodgate/redis_store.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/redis/breaker.h"
#include "store/redis/connection.h"
#include "store/redis/scripts.h"
#include "store/redis/unit.h"

namespace floodgate::redis {

// One connection to a server and what queues for it. Filled by any thread, drained on
// the I/O thread.
struct Lane {
  Lane(boost::asio::io_context& io, Node& node) : node(node), sweep(io) {}
  Node& node;
  std::unique_ptr<Connection> connection;
  std::atomic<bool> ready{false};
  // Filled by any thread, drained by the batcher's Flush on the I/O thread.
  std::mutex mu;
  std::deque<UnitPtr> queued;
  bool flush_posted = false;
  // I/O thread only: script calls sent and not yet answered, and whether Flush left
  // decisions queued because enough calls were out (see Batcher::kCallsOutWhenBatching).
  int calls_out = 0;
  bool holding = false;
  // I/O thread only: decisions sent, oldest first, for the timeout sweep.
  std::deque<UnitPtr> deadlines;
  boost::asio::steady_timer sweep;
  bool sweeping = false;
  bool reported_down = false;  // counted among the failed lanes (start-up)
  // Redis Cluster: what its batches may span, as its handshake found (I/O thread).
  Batching batching = Batching::kPerSlot;
};

// A Redis server: the standalone one, or one cluster primary (or seed). Its breaker
// opens on its own failures only, so a node that is down degrades only its keys.
struct Node {
  Node(RedisEndpoint endpoint, std::string describe, int threshold,
       std::chrono::microseconds open_for)
      : endpoint(std::move(endpoint)),
        describe(std::move(describe)),
        breaker(threshold, open_for) {}
  const RedisEndpoint endpoint;
  const std::string describe;  // for messages
  std::vector<std::unique_ptr<Lane>> lanes;
  std::atomic<std::size_t> next_lane{0};
  Breaker breaker;
  bool seed = false;  // Redis Cluster: only asked for the topology
  // Redis Cluster, I/O thread only. A node found by a redirect or a new topology has not
  // connected yet: its decisions wait here (bounded by their deadlines) until it does,
  // rather than failing and opening its breaker just as it takes over.
  bool ever_ready = false;
  std::deque<UnitPtr> waiting;
  // Out of the slot map (an old primary): connections stopped, never routed to again.
  bool retired = false;
  // Answered CLUSTER SLOTS with an error (a loading or non-cluster node): asked last.
  bool refused_topology = false;

  // I/O thread: no connection is ready, and one has failed, so this is not a node still
  // making its first connections (they are not a reason to ask for the topology again:
  // a first attempt that fails asks by itself).
  bool Unreachable() {
    return PickLane() == nullptr &&
           (ever_ready || std::any_of(lanes.begin(), lanes.end(),
                                      [](const auto& lane) { return lane->reported_down; }));
  }

  // A ready connection, round-robin; nullptr when none is. Thread-safe.
  Lane* PickLane() {
    const std::size_t n = lanes.size();
    const std::size_t start = next_lane.fetch_add(1, std::memory_order_relaxed);
    for (std::size_t i = 0; i < n; ++i) {
      Lane* lane = lanes[(start + i) % n].get();
      if (lane->ready.load(std::memory_order_relaxed)) return lane;
    }
    return nullptr;
  }
};

inline absl::Status NotConnectedError(const Node& node) {
  return absl::UnavailableError(fmt::format("redis at {} is not connected", node.describe));
}

}  // namespace floodgate::redis

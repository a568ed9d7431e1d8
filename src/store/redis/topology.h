#pragma once

// The store's topology as one interface: one server, Sentinel's primary, or a Redis Cluster.
//
// Chosen once from the options (the URL's scheme), it owns what only it needs: the nodes it
// makes (and, for a cluster, the slot map and the redirects; for Sentinel, the sentinels and
// the primary switches: cluster_router.h, sentinel.h, standalone.h). The store hands it every
// unit (Dispatcher) and asks it what Open waits for, Ping's targets, Health and the stats;
// the batcher asks it on a call's error paths (CallErrors). redis-plus-plus keeps the same
// split as types (Redis, Sentinel, RedisCluster).

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <floodgate/redis_store.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/redis/batcher.h"
#include "store/redis/counters.h"
#include "store/redis/dispatch.h"
#include "store/redis/node.h"
#include "store/redis/outcomes.h"
#include "store/redis/replicas.h"
#include "store/redis/scripts.h"
#include "store/redis/startup.h"
#include "store/redis/unit.h"

namespace floodgate::redis {

// What a topology is built from: the store's parts, which outlive it.
struct TopologyParts {
  boost::asio::io_context& io;
  const RedisStoreOptions& options;
  boost::asio::ssl::context* tls;  // null without TLS
  const Scripts& scripts;
  Handshake& handshake;
  Outcomes& outcomes;
  Counters& counters;
  const std::atomic<bool>& closed;  // the store's: nothing new starts once it closes
};

enum class TopologyKind : std::uint8_t { kStandalone, kSentinel, kCluster };

// The topology the options name (redis://, redis-sentinel://, redis-cluster:// and their
// forms), or why they name none (options built in code; FromUrl refuses these itself).
absl::StatusOr<TopologyKind> TopologyOf(const RedisStoreOptions& options);

// Dispatch and SlotOf run on any thread, AddStats anywhere; everything else on the I/O
// thread but WaitStarted (Open's thread).
class Topology : public Dispatcher, private CallErrors, private LaneEvents {
 public:
  static std::unique_ptr<Topology> Make(TopologyKind kind, const TopologyParts& parts);
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
  virtual ~Topology() = default;

  // Connects: the server, the sentinels, or the seeds.
  virtual void Start() = 0;
  // Open: waits until decisions can go (startup.h), or says why they cannot.
  virtual absl::Status WaitStarted() = 0;
  // Closing: every unit not answered yet is answered Cancelled, and every connection stops.
  void Close();
  // The primaries now: what Ping asks.
  virtual std::vector<Node*> Primaries() = 0;
  // OK while decisions have a server to go to (RedisStore::Health); else why not.
  virtual absl::Status Health() = 0;
  // What RedisStats tells of the topology: its primaries (a cluster's), an open breaker.
  void AddStats(RedisStats& stats) const;
  // Its own /metrics lines (redis_metrics.cc).
  virtual void AppendMetrics(const RedisStats& stats, std::string& out) const;

 protected:
  // `batching`: what its lanes' batches span until a handshake finds otherwise (node.h).
  Topology(const TopologyParts& parts, Batching batching, Acknowledge acknowledge);

  // A connection finished its handshake, or went down (after the common part: a ready
  // connection's breaker closes; a drop of a ready one counts as a reconnect).
  virtual void LaneReady(Lane& lane) = 0;
  virtual void LaneDown(Lane& lane, const absl::Status& status) = 0;
  // Closing, once every lane's units were answered and its connection stopped.
  virtual void Stop() {}
  // A cluster's primaries in its slot map (RedisStats::nodes). Any thread.
  virtual std::size_t primary_count() const { return 0; }
  // wait_replicas: the replicas the primary last said were online (a cluster's: the fewest
  // of any primary's); -1 when not watched or not known yet (RedisStats). Any thread.
  virtual int ReplicasOnline() const { return replicas_ ? replicas_->online() : -1; }

  // A node of `connections` lanes, not connected yet. Constructor, or I/O thread.
  Node& AddNode(const RedisEndpoint& endpoint, std::string describe, int connections,
                NodeRole role = NodeRole::kServer);
  // The server node at `endpoint` (seeds and retired nodes aside), made and connected on
  // first use.
  Node& NodeFor(const RedisEndpoint& endpoint);
  // One server at a time (standalone, Sentinel): `unit` through `primary`'s breaker to one
  // of its connections (nullptr: none known yet). Any thread.
  void SendTo(Node* primary, UnitPtr unit, Steady::time_point now);
  // Health with one primary: one of its connections is ready.
  absl::Status HealthOf(Node* primary);
  std::string LastError() { return startup_.LastError(options_); }

  boost::asio::io_context& io_;
  const RedisStoreOptions& options_;
  boost::asio::ssl::context* const tls_;
  Handshake& handshake_;
  Outcomes& outcomes_;
  Counters& counters_;
  const std::atomic<bool>& closed_;
  const Batching batching_;
  Startup startup_;
  Batcher batcher_;
  // wait_replicas > 0 on one server or Sentinel's: the primary's replicas online (replicas.h;
  // a cluster keeps one per primary, cluster_router.h),
  // made by the constructor of the topology that watches them (read from any thread after).
  // Stopped by Close.
  std::unique_ptr<ReplicaWatch> replicas_;
  // HealthOf's answer, then the replicas' when they are watched.
  absl::Status HealthWithReplicas(Node* primary);
  // The nodes it made, their owner. Grows on the I/O thread only (Sentinel's primaries, a
  // cluster's); other threads look under nodes_mu_ (AddStats). Nodes live as long as the
  // store: units point at them.
  mutable std::mutex nodes_mu_;
  std::vector<std::unique_ptr<Node>> nodes_;

 private:
  // LaneEvents (node.h): the common part of a lane's news, then LaneReady / LaneDown.
  // HandshakeOf is each topology's own.
  void OnLaneReady(Lane& lane) final;
  void OnLaneDown(Lane& lane, const absl::Status& status, LaneWas was) final;
};

}  // namespace floodgate::redis

// The topology interface's common part (nodes, lanes' events, closing) and the choice of one.
#include "store/redis/topology.h"

#include <fmt/format.h>
#include <sys/un.h>

#include "common/strings.h"
#include "store/redis/cluster_router.h"
#include "store/redis/sentinel.h"
#include "store/redis/standalone.h"

namespace floodgate::redis {

absl::StatusOr<TopologyKind> TopologyOf(const RedisStoreOptions& options) {
  if (!options.unix_socket.empty() &&
      (options.cluster || options.tls ||
       options.unix_socket.size() >= sizeof(sockaddr_un::sun_path))) {
    return absl::InvalidArgumentError(fmt::format(
        "redis unix socket \"{}\": a path of at most {} bytes, for one server without TLS",
        options.unix_socket, sizeof(sockaddr_un::sun_path) - 1));
  }
  if (options.sentinel && (options.cluster || !options.unix_socket.empty() ||
                           options.seeds.empty() || options.sentinel_master.empty())) {
    return absl::InvalidArgumentError(
        "redis sentinel: sentinels (seeds) and the master's name, over TCP, not a cluster");
  }
  if (options.cluster) return TopologyKind::kCluster;
  if (options.sentinel) return TopologyKind::kSentinel;
  return TopologyKind::kStandalone;
}

std::unique_ptr<Topology> Topology::Make(TopologyKind kind, const TopologyParts& parts) {
  switch (kind) {
    case TopologyKind::kCluster:
      return std::make_unique<ClusterTopology>(parts);
    case TopologyKind::kSentinel:
      return std::make_unique<SentinelTopology>(parts);
    case TopologyKind::kStandalone:
      break;
  }
  return std::make_unique<StandaloneTopology>(parts);
}

Topology::Topology(const TopologyParts& parts, Batching batching, Acknowledge acknowledge)
    : io_(parts.io),
      options_(parts.options),
      tls_(parts.tls),
      handshake_(parts.handshake),
      outcomes_(parts.outcomes),
      counters_(parts.counters),
      closed_(parts.closed),
      batching_(batching),
      batcher_(parts.io, parts.options, parts.scripts, parts.outcomes, parts.counters, *this,
               acknowledge) {}

void Topology::Close() {
  const absl::Status closed = absl::CancelledError("store closed");
  // Everything not yet answered is answered Cancelled first: stopping a connection
  // fails its calls, whose handlers would otherwise flush what queued behind them to
  // a connection that is no longer there (an error, answered by on_error).
  for (auto& node : nodes_) {
    for (auto& lane : node->lanes()) batcher_.Drain(*lane, closed);
  }
  if (replicas_) replicas_->Stop();
  for (auto& node : nodes_) node->Stop();
  Stop();
}

absl::Status Topology::HealthWithReplicas(Node* primary) {
  absl::Status health = HealthOf(primary);
  if (!health.ok() || !replicas_) return health;
  return replicas_->Health();
}

void Topology::AddStats(RedisStats& stats) const {
  stats.nodes = primary_count();
  stats.replicas_online = ReplicasOnline();
  const Steady::time_point now = Steady::now();
  std::lock_guard lock(nodes_mu_);
  for (const auto& node : nodes_) {
    stats.breaker_open = stats.breaker_open || node->breaker.open(now);
  }
}

void Topology::AppendMetrics(const RedisStats&, std::string&) const {}

Node& Topology::AddNode(const RedisEndpoint& endpoint, std::string describe, int connections,
                        NodeRole role) {
  auto node = std::make_unique<Node>(endpoint, std::move(describe), options_.breaker_failures,
                                     options_.breaker_open, role);
  ConnectionOptions connection;
  connection.host = endpoint.host;
  connection.port = endpoint.port;
  connection.connect_timeout = options_.connect_timeout;
  connection.reconnect_min = options_.reconnect_min;
  connection.reconnect_max = options_.reconnect_max;
  connection.tls = tls_;
  connection.tls_server_name = options_.tls_server_name;
  connection.unix_socket = options_.unix_socket;  // set only for one standalone server
  node->AddLanes(io_, connection, connections, batching_, *this);
  Node& made = *node;
  std::lock_guard lock(nodes_mu_);
  nodes_.push_back(std::move(node));
  return made;
}

Node& Topology::NodeFor(const RedisEndpoint& endpoint) {
  for (auto& node : nodes_) {
    // Seeds have one connection, for discovery; decisions get a node of their own.
    if (node->endpoint == endpoint && node->role == NodeRole::kServer && !node->retired()) {
      return *node;
    }
  }
  Node& node =
      AddNode(endpoint, HostPort(endpoint.host, endpoint.port), options_.connections_per_server());
  node.Start();
  return node;
}

void Topology::SendTo(Node* primary, UnitPtr pending, Steady::time_point now) {
  if (primary == nullptr) {
    return outcomes_.Complete(*pending, absl::UnavailableError(LastError()));
  }
  Node& node = *primary;
  pending->route.node = &node;
  if (!node.breaker.Allow(now)) return outcomes_.AnswerWhileOpen(*pending);
  Lane* lane = node.PickLane();
  if (lane == nullptr) {
    return outcomes_.Complete(*pending, absl::UnavailableError(LastError()));
  }
  batcher_.Enqueue(*lane, std::move(pending));
}

absl::Status Topology::HealthOf(Node* primary) {
  if (primary != nullptr && primary->PickLane() != nullptr) return absl::OkStatus();
  return absl::UnavailableError(LastError());
}

void Topology::OnLaneReady(Lane& lane) {
  // A connection that finished its handshake (AUTH, SCRIPT LOAD) has heard the server
  // answer: decisions go to it at once, not after the breaker's open period.
  lane.node.breaker.Success();
  LaneReady(lane);
}

void Topology::OnLaneDown(Lane& lane, const absl::Status& status, LaneWas was) {
  if (was == LaneWas::kReady) ++counters_.reconnects;
  LaneDown(lane, status);
}

}  // namespace floodgate::redis

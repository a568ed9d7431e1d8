#pragma once

// Redis Cluster: slot map, refresh, routing, MOVED/ASK/TRYAGAIN/CLUSTERDOWN in one place.

#include <floodgate/redis_store.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/redis/cluster.h"
#include "store/redis/topology.h"

namespace floodgate::redis {

// A Redis Cluster (redis-cluster://): the seeds are asked for the slot map (CLUSTER SLOTS),
// each unit goes to the primary owning its key's slot, and redirects and refusals are
// followed. Dispatch and primary_count run on any thread; everything else on the I/O
// thread.
class ClusterTopology final : public Topology {
 public:
  explicit ClusterTopology(const TopologyParts& parts);

  // Connects to the seeds, which are asked for the slot map once one is up.
  void Start() override;
  // Succeeds once a seed told the slot map and every primary's connections were tried
  // (startup.h).
  absl::Status WaitStarted() override;
  // The slot map belongs to the I/O thread: the unit is routed there.
  void Dispatch(UnitPtr unit, Steady::time_point now) override;
  int SlotOf(std::string_view redis_key) const override { return redis::SlotOf(redis_key); }
  // The distinct primaries of the slot map.
  std::vector<Node*> Primaries() override { return owner_nodes_; }
  // OK once the slot map is known and every primary in it has a ready connection.
  absl::Status Health() override;
  void AppendMetrics(const RedisStats& stats, std::string& out) const override;

 private:
  // What the cluster keeps of each node it made, beside it (I/O thread).
  struct Member {
    // A node found by a redirect or a new slot map has not connected yet: its decisions
    // wait here (bounded by their deadlines, watched by its first lane) until it does,
    // rather than failing and opening its breaker just as it takes over.
    bool ever_ready = false;
    std::deque<UnitPtr> waiting;
    // Answered CLUSTER SLOTS with an error (a loading or non-cluster node): asked last.
    bool refused_topology = false;
  };
  Member& MemberOf(const Node& node) { return members_[&node]; }
  bool Unreachable(const Node& node);

  // AUTH (or PING), SELECT, the scripts, and the node batch script, whose answer is the
  // lane's Batching.
  std::vector<HandshakeStep> HandshakeOf(Lane& lane) override;
  absl::Status NotConnected(const Node& node) override;
  // A call's error reply: a redirect or a refusal (the script did not run, so sending it
  // again cannot count a decision twice) takes the chunk to send it again; true then.
  bool Redirected(Lane& lane, std::string_view error, std::vector<UnitPtr>& chunk) override;
  // Decisions timed out on a primary that sits silent on its calls (stopped, say) while
  // its connection stays up: its replica may be promoted meanwhile, and nothing else
  // would ask for the slot map until the connection is taken for dead.
  void ServerSilent(Lane& lane) override;
  // A connection finished its handshake, or went down (told to startup too).
  void LaneReady(Lane& lane) override;
  void LaneDown(Lane& lane, const absl::Status& status) override;
  // Closing: no more refreshes; what waits to be routed is answered Cancelled.
  void Stop() override;
  std::size_t primary_count() const override { return primaries_.load(); }
  int ReplicasOnline() const override;

  void RouteQueued();
  template <class Range>
  void Route(Range& units);
  bool Live(Unit& unit, Steady::time_point now);
  bool CountRedirect(Unit& unit);
  bool Admit(Node& node, Unit& unit, Steady::time_point now);
  void Wait(Node& node, const UnitPtr& unit);
  void Reroute(std::vector<UnitPtr> chunk);
  void Ask(Node& target, std::vector<UnitPtr> chunk);
  void RequestRefresh();
  void StartRefresh();
  void OnSlots(Lane& lane, absl::StatusOr<Reply> reply);
  void ApplyTopology(const std::vector<SlotRange>& ranges);
  void UpdateSettled();
  void WatchReplicas();
  bool Silent(const Node& node, Steady::time_point now) const;

  // Units wait in route_queue_ for the I/O thread, which owns the rest.
  std::mutex route_mu_;
  std::deque<UnitPtr> route_queue_;
  bool route_posted_ = false;
  std::vector<Node*> seeds_;  // asked for the slot map only
  boost::asio::steady_timer refresh_timer_;
  Steady::time_point last_refresh_{};
  bool refresh_in_flight_ = false;
  bool refresh_scheduled_ = false;
  bool topology_known_ = false;
  bool settled_ = false;
  std::unordered_map<const Node*, Member> members_;  // references stay valid as it grows
  std::vector<Node*> owners_;       // slot -> primary (nullptr: no one serves it)
  std::vector<Node*> owner_nodes_;  // the distinct primaries
  std::atomic<std::size_t> primaries_{0};
  // wait_replicas: a ReplicaWatch per primary (replicas.h), made when the slot map names
  // it, stopped when it leaves the map (kept: a reply may still be on its way to it).
  // Health and ReplicasOnline read them from any thread, under watches_mu_.
  mutable std::mutex watches_mu_;
  std::unordered_map<const Node*, std::unique_ptr<ReplicaWatch>> watches_;
  std::vector<ReplicaWatch*> watching_;  // the slot map's primaries' watches
};

}  // namespace floodgate::redis

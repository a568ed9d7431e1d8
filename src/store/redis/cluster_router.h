#pragma once

// Redis Cluster only: slot map, refresh, routing, MOVED/ASK/TRYAGAIN/CLUSTERDOWN in one place.

#include <floodgate/redis_store.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "store/redis/batcher.h"
#include "store/redis/cluster.h"
#include "store/redis/counters.h"
#include "store/redis/dispatch.h"
#include "store/redis/node.h"
#include "store/redis/outcomes.h"
#include "store/redis/startup.h"
#include "store/redis/unit.h"

namespace floodgate::redis {

// Submit runs on any thread, primary_count anywhere; everything else on the I/O thread.
class ClusterRouter {
 public:
  ClusterRouter(boost::asio::io_context& io, const RedisStoreOptions& options, Outcomes& outcomes,
                Counters& counters, Batcher& batcher, Startup& startup,
                const std::vector<std::unique_ptr<Node>>& nodes, NodeSource& node_source,
                const std::atomic<bool>& closed);

  // Constructor of the store: a seed, asked for the topology only.
  void AddSeed(Node& seed) { seeds_.push_back(&seed); }
  std::size_t seed_count() const { return seeds_.size(); }

  // Any thread. The slot map belongs to the I/O thread: the unit is routed there.
  void Submit(UnitPtr unit);
  // A connection finished its handshake, or went down (told to startup too).
  void OnLaneReady(Lane& lane);
  void OnLaneDown(Lane& lane, const absl::Status& status);
  // A call's error reply: a redirect or a refusal (the script did not run, so sending it
  // again cannot count a decision twice) takes the chunk to send it again; true then.
  bool Redirected(Lane& lane, std::string_view error, std::vector<UnitPtr>& chunk);
  // Closing: no more refreshes; what waits to be routed is answered Cancelled.
  void Stop();

  // The distinct primaries of the slot map.
  const std::vector<Node*>& primaries() const { return owner_nodes_; }
  std::size_t primary_count() const { return primaries_.load(); }  // any thread

 private:
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

  boost::asio::io_context& io_;
  const RedisStoreOptions& options_;
  Outcomes& outcomes_;
  Counters& counters_;
  Batcher& batcher_;
  Startup& startup_;
  const std::vector<std::unique_ptr<Node>>& nodes_;
  NodeSource& node_source_;
  const std::atomic<bool>& closed_;  // the store's: no refresh once it closes

  // Units wait in route_queue_ for the I/O thread, which owns the rest.
  std::mutex route_mu_;
  std::deque<UnitPtr> route_queue_;
  bool route_posted_ = false;
  std::vector<Node*> seeds_;
  boost::asio::steady_timer refresh_timer_;
  Steady::time_point last_refresh_{};
  bool refresh_in_flight_ = false;
  bool refresh_scheduled_ = false;
  bool topology_known_ = false;
  bool settled_ = false;
  std::vector<Node*> owners_;       // slot -> primary (nullptr: no one serves it)
  std::vector<Node*> owner_nodes_;  // the distinct primaries
  std::atomic<std::size_t> primaries_{0};
};

}  // namespace floodgate::redis

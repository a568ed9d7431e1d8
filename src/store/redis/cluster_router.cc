// Redis Cluster: slot map, refresh, routing, MOVED/ASK/TRYAGAIN/CLUSTERDOWN in one place.
#include "store/redis/cluster_router.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/post.hpp>

#include "common/strings.h"

namespace floodgate::redis {

namespace {

// MOVED / ASK / TRYAGAIN followed per unit before it is answered by on_error: a guard
// against a loop, not a budget for a migration, which the unit's deadline bounds. One
// slot's migration under load takes a unit through 3 hops routinely (ASK, TRYAGAIN for a
// batch half moved, MOVED once the slot has moved; counted in the resharding test), more
// when the slot map it refreshes from lags behind; 5 answered 1 decision of ~11,000 by
// on_error during `redis-cli --cluster reshard`. 16 is redis-py's limit for the same
// (its RedisClusterRequestTTL).
constexpr int kMaxRedirects = 16;
// A storm of redirects or dropped connections asks for one topology refresh per this.
constexpr auto kRefreshInterval = std::chrono::milliseconds(100);
// TRYAGAIN (a multi-key call during a migration) and CLUSTERDOWN are retried after this.
constexpr auto kRetryDelay = std::chrono::milliseconds(10);

}  // namespace

ClusterTopology::ClusterTopology(const TopologyParts& parts)
    : Topology(parts, Batching::kPerSlot,
               parts.options.wait_replicas > 0 ? Acknowledge::kByWait : Acknowledge::kNo),
      refresh_timer_(parts.io),
      owners_(kClusterSlots, nullptr) {
  // The seeds answer CLUSTER SLOTS; the primaries found there get nodes of their own.
  for (const RedisEndpoint& seed : options_.seeds) {
    // One connection is enough to ask for the topology.
    seeds_.push_back(&AddNode(seed, HostPort(seed.host, seed.port), 1, NodeRole::kSeed));
  }
}

void ClusterTopology::Start() {
  for (Node* seed : seeds_) seed->Start();
}

absl::Status ClusterTopology::WaitStarted() {
  return startup_.WaitForSlotMap(options_, seeds_.size());
}

absl::Status ClusterTopology::Health() {
  if (owner_nodes_.empty()) {
    return absl::UnavailableError(
        fmt::format("redis cluster {}: no slot map yet ({})", options_.Describe(), LastError()));
  }
  for (Node* node : owner_nodes_) {
    if (node->PickLane() == nullptr) {
      return absl::UnavailableError(
          fmt::format("{} ({})", MessageOf(NotConnectedError(*node)), LastError()));
    }
  }
  // wait_replicas: every primary must have them (a failover may have left one without).
  std::lock_guard lock(watches_mu_);
  for (const ReplicaWatch* watch : watching_) {
    if (absl::Status replicas = watch->Health(); !replicas.ok()) return replicas;
  }
  return absl::OkStatus();
}

int ClusterTopology::ReplicasOnline() const {
  std::lock_guard lock(watches_mu_);
  if (watching_.empty()) return -1;
  int fewest = watching_.front()->online();
  for (const ReplicaWatch* watch : watching_) {
    const int online = watch->online();
    if (online < 0) return -1;  // a primary has not said yet
    fewest = std::min(fewest, online);
  }
  return fewest;
}

std::vector<HandshakeStep> ClusterTopology::HandshakeOf(Lane& lane) {
  std::vector<HandshakeStep> steps;
  handshake_.Login(lane.node.describe, steps);
  handshake_.LoadScripts(lane.node.describe, steps);
  handshake_.LoadNodeBatch([&lane](Batching batching) { lane.set_batching(batching); }, steps);
  return steps;
}

absl::Status ClusterTopology::NotConnected(const Node& node) { return NotConnectedError(node); }

void ClusterTopology::Dispatch(UnitPtr unit, Steady::time_point) {
  unit->route.slot = redis::SlotOf(unit->item().redis_key);
  std::lock_guard lock(route_mu_);
  route_queue_.push_back(std::move(unit));
  if (!route_posted_) {
    route_posted_ = true;
    boost::asio::post(io_, [this] { RouteQueued(); });
  }
}

void ClusterTopology::Stop() {
  // What waited for a node to connect was answered with the deadlines of its first lane.
  for (auto& [node, member] : members_) {
    for (auto& unit : member.waiting)
      outcomes_.Complete(*unit, absl::CancelledError("store closed"));
    member.waiting.clear();
  }
  refresh_timer_.cancel();
  for (auto& [node, watch] : watches_) watch->Stop();
  std::deque<UnitPtr> unrouted;
  {
    std::lock_guard lock(route_mu_);
    unrouted.swap(route_queue_);
  }
  for (auto& unit : unrouted) outcomes_.Complete(*unit, absl::CancelledError("store closed"));
}

void ClusterTopology::LaneReady(Lane& lane) {
  Member& member = MemberOf(lane.node);
  member.ever_ready = true;
  if (!member.waiting.empty()) {
    std::deque<UnitPtr> waiting;
    waiting.swap(member.waiting);
    Route(waiting);
  }
  if (!topology_known_) StartRefresh();  // a seed is up: ask it for the slot map
  UpdateSettled();
  // A primary's first connection: how many replicas it has, at once (not in a second).
  // watches_ changes on this thread only: no lock to read it here.
  if (const auto watch = watches_.find(&lane.node);
      watch != watches_.end() && watch->second->online() < 0) {
    watch->second->AskNow();
  }
}

void ClusterTopology::ServerSilent(Lane& lane) {
  if (std::find(owner_nodes_.begin(), owner_nodes_.end(), &lane.node) != owner_nodes_.end()) {
    RequestRefresh();
  }
}

// As the batcher blames a timeout on Redis (batcher.cc, BlameForTimeout): a connection's
// oldest call unanswered, not a byte back, for half the timeout. Any of the node's: a
// stopped server's idle connection looks healthy until it is asked something.
bool ClusterTopology::Silent(const Node& node, Steady::time_point now) const {
  return std::any_of(node.lanes().begin(), node.lanes().end(), [&](const auto& lane) {
    return lane->connection->SilentFor(now) >= options_.timeout / 2;
  });
}

void ClusterTopology::LaneDown(Lane& lane, const absl::Status& status) {
  // A lost primary may have been replaced: look at the topology again.
  if (std::find(owner_nodes_.begin(), owner_nodes_.end(), &lane.node) != owner_nodes_.end()) {
    RequestRefresh();
  }
  startup_.LaneDown(lane, status);
  UpdateSettled();
}

// No connection is ready, and one has failed, so this is not a node still making its
// first connections (they are not a reason to ask for the topology again: a first attempt
// that fails asks by itself).
bool ClusterTopology::Unreachable(const Node& node) {
  return node.PickLane() == nullptr &&
         (MemberOf(node).ever_ready ||
          std::any_of(node.lanes().begin(), node.lanes().end(),
                      [](const auto& lane) { return lane->failures() > 0; }));
}

void ClusterTopology::RouteQueued() {
  std::deque<UnitPtr> queued;
  {
    std::lock_guard lock(route_mu_);
    route_posted_ = false;
    queued.swap(route_queue_);
  }
  Route(queued);
}

// Sends each unit to the primary owning its slot, then flushes the connections that got
// some.
template <class Range>
void ClusterTopology::Route(Range& units) {
  std::vector<Lane*> touched;
  const Steady::time_point now = Steady::now();
  for (auto& unit : units) {
    if (!Live(*unit, now)) continue;
    Node* node = owners_[unit->route.slot];
    if (node == nullptr) {
      RequestRefresh();
      outcomes_.Complete(
          *unit, absl::UnavailableError(fmt::format("redis cluster {}: no primary serves slot {}",
                                                    options_.Describe(), unit->route.slot)));
      continue;
    }
    if (!Admit(*node, *unit, now)) continue;
    Lane* lane = node->PickLane();
    if (lane == nullptr) {
      if (!MemberOf(*node).ever_ready) {
        Wait(*node, unit);
        continue;
      }
      RequestRefresh();
      outcomes_.Complete(*unit, NotConnectedError(*node));
      continue;
    }
    batcher_.Stage(*lane, unit);
    if (std::find(touched.begin(), touched.end(), lane) == touched.end()) touched.push_back(lane);
  }
  for (Lane* lane : touched) batcher_.Flush(*lane);
}

// Not answered yet, and within its deadline (else answered as timed out).
bool ClusterTopology::Live(Unit& unit, Steady::time_point now) {
  if (unit.answered) return false;
  if (now < unit.deadline) return true;
  outcomes_.Complete(unit, batcher_.TimeoutError());
  return false;
}

// Counts one more redirect or retry; past kMaxRedirects the unit is answered.
bool ClusterTopology::CountRedirect(Unit& unit) {
  if (unit.answered) return false;
  if (++unit.route.redirects <= kMaxRedirects) return true;
  outcomes_.Complete(unit, absl::UnavailableError(fmt::format(
                               "redis cluster {}: slot {} still redirected after {} tries",
                               options_.Describe(), unit.route.slot, kMaxRedirects)));
  return false;
}

// Sends the unit to `node` if the node's breaker lets it (its outcome then feeds that
// breaker); a retry on the node that already admitted it is not asked again (it may be
// the breaker's probe). Answers it by on_error when not.
bool ClusterTopology::Admit(Node& node, Unit& unit, Steady::time_point now) {
  unit.route.node = &node;
  if (unit.route.admitted_by == &node) return true;
  if (!node.breaker.Allow(now)) {
    outcomes_.AnswerWhileOpen(unit);
    return false;
  }
  unit.route.admitted_by = &node;
  return true;
}

// A node that has not connected yet: the unit waits for it, its deadline enforced by
// the sweep of the node's first connection.
void ClusterTopology::Wait(Node& node, const UnitPtr& unit) {
  MemberOf(node).waiting.push_back(unit);
  batcher_.Watch(*node.lanes().front(), unit);
}

// A redirect or retry: the call did not run, so the units go again (bounded).
void ClusterTopology::Reroute(std::vector<UnitPtr> chunk) {
  for (auto& unit : chunk) CountRedirect(*unit);
  Route(chunk);
}

bool ClusterTopology::Redirected(Lane& lane, std::string_view error, std::vector<UnitPtr>& chunk) {
  if (auto redirect = ParseRedirect(error)) {
    // "MOVED 3999 :6381": an unknown endpoint means the host that answered.
    if (redirect->target.host.empty()) redirect->target.host = lane.node.endpoint.host;
    Node& target = NodeFor(redirect->target);
    if (redirect->kind == Redirect::Kind::kMoved) {
      ++counters_.moved;
      owners_[redirect->slot] = &target;
      RequestRefresh();  // more slots have probably moved
      Reroute(std::move(chunk));
      return true;
    }
    ++counters_.asked;
    // A node's batch: only the asked slot's units go to the importing node; the others
    // go to their owner again.
    const auto others = std::stable_partition(chunk.begin(), chunk.end(), [&](const UnitPtr& u) {
      return u->route.slot == redirect->slot;
    });
    std::vector<UnitPtr> rest(std::make_move_iterator(others),
                              std::make_move_iterator(chunk.end()));
    chunk.erase(others, chunk.end());
    Ask(target, std::move(chunk));
    if (!rest.empty()) Route(rest);
    return true;
  }
  if (error.find("Script attempted to access a non local key") != std::string_view::npos) {
    // lua/node_batch.lua met a key its node no longer serves (moved, or migrating and
    // absent). It reads every key before writing any, so nothing was written: the slot
    // map is stale, and the units go again, each batched within its slot from now on.
    ++counters_.node_batch_retries;
    for (auto& unit : chunk) unit->route.by_slot = true;
    RequestRefresh();
    Reroute(std::move(chunk));
    return true;
  }
  if (error.starts_with("TRYAGAIN") || error.starts_with("CLUSTERDOWN")) {
    ++counters_.retried;
    // TRYAGAIN: some of a batch's keys have migrated and some not. One key at a time,
    // each follows its own ASK.
    if (chunk.size() > 1) {
      for (auto& unit : chunk) unit->route.alone = true;
    }
    if (error.starts_with("CLUSTERDOWN")) RequestRefresh();
    auto timer = std::make_shared<boost::asio::steady_timer>(io_, kRetryDelay);
    timer->async_wait(
        [this, timer, chunk = std::move(chunk)](const boost::system::error_code& ec) mutable {
          if (!ec) Reroute(std::move(chunk));
        });
    return true;
  }
  return false;
}

// ASK: this one call goes to the importing node, after ASKING; the slot map stays.
void ClusterTopology::Ask(Node& target, std::vector<UnitPtr> chunk) {
  // As in Route: within the deadline, and the target's breaker decides (and hears how
  // it went: the call runs there).
  const Steady::time_point now = Steady::now();
  for (auto& unit : chunk) {
    if (CountRedirect(*unit) && Live(*unit, now)) Admit(target, *unit, now);
  }
  std::erase_if(chunk, [](const UnitPtr& unit) { return unit->answered; });
  if (chunk.empty()) return;
  Lane* lane = target.PickLane();
  if (lane == nullptr) {
    for (auto& unit : chunk) {
      if (!MemberOf(target).ever_ready) {
        // The importing node is new to us: wait for its connection; the unit then goes
        // to the slot's owner again, which sends it here with ASK once more.
        Wait(target, unit);
      } else {
        outcomes_.Complete(*unit, NotConnectedError(target));
      }
    }
    return;
  }
  batcher_.SendAsked(*lane, std::move(chunk));
}

void ClusterTopology::RequestRefresh() {
  if (closed_ || refresh_in_flight_ || refresh_scheduled_) return;
  const Steady::time_point earliest = last_refresh_ + kRefreshInterval;
  if (Steady::now() >= earliest) return StartRefresh();
  refresh_scheduled_ = true;
  refresh_timer_.expires_at(earliest);
  refresh_timer_.async_wait([this](const boost::system::error_code& ec) {
    refresh_scheduled_ = false;
    if (!ec) StartRefresh();
  });
}

// Asks CLUSTER SLOTS of a reachable node: a primary first, else any (the seeds), and a
// node that refused before only when no other answers.
void ClusterTopology::StartRefresh() {
  if (refresh_in_flight_ || closed_) return;
  const Steady::time_point now = Steady::now();
  last_refresh_ = now;
  // Not a silent node: it would sit on the question as on its decisions (a stopped
  // primary, whose replica is what the refresh is looking for).
  const auto asked = [&](Node& node) -> Lane* {
    return Silent(node, now) ? nullptr : node.PickLane();
  };
  Lane* lane = nullptr;
  for (Node* node : owner_nodes_) {
    if ((lane = asked(*node)) != nullptr) break;
  }
  for (int pass = 0; pass < 2 && lane == nullptr; ++pass) {
    for (std::size_t i = 0; lane == nullptr && i < nodes_.size(); ++i) {
      Node& node = *nodes_[i];
      if (!node.retired() && MemberOf(node).refused_topology == (pass == 1)) {
        lane = asked(node);
      }
    }
  }
  if (lane == nullptr) return RequestRefresh();  // nobody reachable yet: try again soon
  refresh_in_flight_ = true;
  ++counters_.refreshes;
  std::string command;
  AppendCommand(command, {"CLUSTER", "SLOTS"});
  lane->connection->Send(
      command, [this, lane](absl::StatusOr<Reply> reply) { OnSlots(*lane, std::move(reply)); });
  // The stall check covers this call too: an answer that never comes (a half-open
  // connection) drops the connection, which fails the call, which asks again.
  batcher_.ArmSweep(*lane);
}

void ClusterTopology::OnSlots(Lane& lane, absl::StatusOr<Reply> reply) {
  refresh_in_flight_ = false;
  if (!reply.ok()) return RequestRefresh();
  auto ranges = ParseClusterSlots(**reply, lane.node.endpoint.host);
  if (!ranges.ok()) {
    MemberOf(lane.node).refused_topology = true;
    // Start-up fails only once every seed has refused (one may still be loading).
    const bool all_refused = std::all_of(seeds_.begin(), seeds_.end(), [this](Node* seed) {
      return MemberOf(*seed).refused_topology;
    });
    if (!topology_known_ && all_refused) {
      startup_.TopologyRefused(absl::FailedPreconditionError(
          fmt::format("redis at {} did not give the cluster topology ({}); for a single server use "
                      "redis://",
                      lane.node.describe, MessageOf(ranges.status()))));
    }
    // Asked again (a seed may still be joining its cluster); a store whose Open failed
    // on the error above is closed before this comes round.
    return RequestRefresh();
  }
  MemberOf(lane.node).refused_topology = false;
  ApplyTopology(*ranges);
  // Slots no primary serves (a cluster still being created, or a primary lost with no
  // replica to promote): keep asking, at most once per kRefreshInterval.
  if (std::find(owners_.begin(), owners_.end(), nullptr) != owners_.end()) {
    return RequestRefresh();
  }
  // Until every slot's primary is reachable (a replica is being promoted, say), keep
  // looking, at most once per kRefreshInterval. Primaries just found and still making
  // their first connections are not a reason: if those fail, OnLaneDown asks.
  for (Node* node : owner_nodes_) {
    if (Unreachable(*node)) return RequestRefresh();
  }
}

void ClusterTopology::ApplyTopology(const std::vector<SlotRange>& ranges) {
  std::fill(owners_.begin(), owners_.end(), nullptr);
  owner_nodes_.clear();
  for (const SlotRange& range : ranges) {
    Node& node = NodeFor(range.primary);
    std::fill(owners_.begin() + range.first, owners_.begin() + range.last + 1, &node);
    if (std::find(owner_nodes_.begin(), owner_nodes_.end(), &node) == owner_nodes_.end()) {
      owner_nodes_.push_back(&node);
    }
  }
  primaries_ = owner_nodes_.size();
  // Old primaries (failed over, or removed) stop reconnecting; a later redirect to the
  // same address gets a new node. Seeds stay, for the next CLUSTER SLOTS.
  for (auto& node : nodes_) {
    if (node->role == NodeRole::kSeed || node->retired() ||
        std::find(owner_nodes_.begin(), owner_nodes_.end(), node.get()) != owner_nodes_.end()) {
      continue;
    }
    // Calls in flight there are cancelled, not failed (no reason given).
    node->Retire(std::nullopt);
    std::deque<UnitPtr> waiting;
    waiting.swap(MemberOf(*node).waiting);
    Route(waiting);  // to whoever owns their slots now
  }
  topology_known_ = true;
  startup_.TopologyKnown();
  UpdateSettled();
  WatchReplicas();
}

// wait_replicas: a watch for each primary the slot map names (a new one after a failover:
// nothing is known of its replicas until it says), the others' stopped.
void ClusterTopology::WatchReplicas() {
  if (options_.wait_replicas <= 0) return;
  std::vector<ReplicaWatch*> watching, made;
  {
    std::lock_guard lock(watches_mu_);
    for (Node* node : owner_nodes_) {
      std::unique_ptr<ReplicaWatch>& watch = watches_[node];
      if (watch == nullptr) {
        watch = std::make_unique<ReplicaWatch>(io_, options_.wait_replicas,
                                               [node] { return node; });
        made.push_back(watch.get());
      }
      watching.push_back(watch.get());
    }
    for (ReplicaWatch* watch : watching_) {
      if (std::find(watching.begin(), watching.end(), watch) == watching.end()) watch->Stop();
    }
    watching_ = std::move(watching);
  }
  for (ReplicaWatch* watch : made) watch->Start();
}

// Start-up: the topology is known and every primary's connections have been tried.
void ClusterTopology::UpdateSettled() {
  if (!topology_known_ || settled_) return;
  for (Node* node : owner_nodes_) {
    for (auto& lane : node->lanes()) {
      if (!lane->ready() && lane->failures() == 0) return;
    }
  }
  settled_ = true;
  startup_.ClusterSettled();
}

}  // namespace floodgate::redis

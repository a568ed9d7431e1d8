// One Redis server (redis://, rediss://, redis+unix://): every key on it, no routing.
#include "store/redis/standalone.h"

namespace floodgate::redis {

StandaloneTopology::StandaloneTopology(const TopologyParts& parts)
    : Topology(parts, Batching::kPerNode,
               parts.options.wait_replicas > 0 ? Acknowledge::kByWait : Acknowledge::kNo),
      server_(AddNode({options_.host, options_.port}, options_.Describe(),
                      options_.connections_per_server())) {
  // Made here, before the I/O thread runs, so that Health and AddStats on other threads
  // see it; it asks from Start on.
  if (options_.wait_replicas > 0) {
    replicas_ = std::make_unique<ReplicaWatch>(io_, options_.wait_replicas,
                                               [this] { return &server_; });
  }
}

void StandaloneTopology::Start() {
  server_.Start();
  if (replicas_) replicas_->Start();
}

// Succeeds once one of the server's connections is ready (startup.h).
absl::Status StandaloneTopology::WaitStarted() {
  return startup_.WaitForConnection(options_, server_.lanes().size());
}

void StandaloneTopology::Dispatch(UnitPtr unit, Steady::time_point now) {
  SendTo(&server_, std::move(unit), now);
}

std::vector<HandshakeStep> StandaloneTopology::HandshakeOf(Lane& lane) {
  std::vector<HandshakeStep> steps;
  handshake_.Login(lane.node.describe, steps);
  handshake_.LoadScripts(lane.node.describe, steps);
  return steps;
}

absl::Status StandaloneTopology::NotConnected(const Node&) {
  return absl::UnavailableError(LastError());
}

// A server without a cluster redirects nothing: the error is the call's answer.
bool StandaloneTopology::Redirected(Lane&, std::string_view, std::vector<UnitPtr>&) {
  return false;
}

void StandaloneTopology::LaneReady(Lane&) {
  startup_.LaneReady();
  if (replicas_ && replicas_->online() < 0) replicas_->AskNow();
}

void StandaloneTopology::LaneDown(Lane& lane, const absl::Status& status) {
  startup_.LaneDown(lane, status);
}

}  // namespace floodgate::redis

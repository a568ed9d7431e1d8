// A lane's connection state and a node's lanes: written here only (node.h).
#include "store/redis/node.h"

namespace floodgate::redis {

Lane::Lane(boost::asio::io_context& io, Node& node, ConnectionOptions options, Batching batching,
           LaneEvents& events)
    : node(node),
      connection(
          std::make_unique<Connection>(io, std::move(options),
                                       Connection::Hooks{
                                           [this] { return events_.HandshakeOf(*this); },
                                           [this] { OnReady(); },
                                           [this](const absl::Status& status) { OnDown(status); },
                                       })),
      events_(events),
      batching_(batching),
      queue_(io) {}

void Lane::OnReady() {
  ready_ = true;
  events_.OnLaneReady(*this);
}

void Lane::OnDown(const absl::Status& status) {
  const LaneWas was = ready_.exchange(false) ? LaneWas::kReady : LaneWas::kConnecting;
  ++failures_;
  events_.OnLaneDown(*this, status, was);
}

void Lane::Stop(const std::optional<absl::Status>& reason) {
  ready_ = false;
  if (reason) connection->Abort(*reason);
  connection->Stop();
}

void Node::AddLanes(boost::asio::io_context& io, const ConnectionOptions& options, int count,
                    Batching batching, LaneEvents& events) {
  for (int i = 0; i < count; ++i) {
    lanes_.push_back(std::make_unique<Lane>(io, *this, options, batching, events));
  }
}

Lane* Node::PickLane() const {
  const std::size_t n = lanes_.size();
  const std::size_t start = next_lane_.fetch_add(1, std::memory_order_relaxed);
  for (std::size_t i = 0; i < n; ++i) {
    Lane* lane = lanes_[(start + i) % n].get();
    if (lane->ready()) return lane;
  }
  return nullptr;
}

void Node::Start() {
  for (auto& lane : lanes_) lane->connection->Start();
}

void Node::Stop() {
  for (auto& lane : lanes_) lane->connection->Stop();
}

void Node::Retire(const std::optional<absl::Status>& reason) {
  retired_ = true;
  for (auto& lane : lanes_) lane->Stop(reason);
}

}  // namespace floodgate::redis

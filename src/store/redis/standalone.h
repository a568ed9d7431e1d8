#pragma once

// One Redis server (redis://, rediss://, redis+unix://): every key on it, no routing.

#include <string_view>
#include <vector>

#include "store/redis/topology.h"

namespace floodgate::redis {

class StandaloneTopology final : public Topology {
 public:
  explicit StandaloneTopology(const TopologyParts& parts);

  void Start() override;
  absl::Status WaitStarted() override;
  void Dispatch(UnitPtr unit, Steady::time_point now) override;
  // One server holds every key: a multi-decision is one call.
  int SlotOf(std::string_view) const override { return 0; }
  std::vector<Node*> Primaries() override { return {&server_}; }
  absl::Status Health() override { return HealthWithReplicas(&server_); }

 private:
  // AUTH (or PING), SELECT, the scripts.
  std::vector<HandshakeStep> HandshakeOf(Lane& lane) override;
  absl::Status NotConnected(const Node& node) override;
  bool Redirected(Lane& lane, std::string_view error, std::vector<UnitPtr>& chunk) override;
  void LaneReady(Lane& lane) override;
  void LaneDown(Lane& lane, const absl::Status& status) override;

  Node& server_;
};

}  // namespace floodgate::redis

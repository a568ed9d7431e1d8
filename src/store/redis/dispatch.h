#pragma once

// How the store's parts hand units on: to be sent, sent again after a redirect, or rerouted.

#include <absl/status/status.h>
#include <floodgate/redis_store.h>

#include <string_view>
#include <vector>

#include "store/redis/unit.h"

namespace floodgate::redis {

class Lane;
class Node;

// Implemented by the topology (topology.h): a unit on its way (routed on a cluster, else
// admitted by the server's breaker and queued on a lane). A virtual call per unit.
class Dispatcher {
 public:
  // Any thread.
  virtual void Dispatch(UnitPtr unit, Steady::time_point now) = 0;
  // Any thread: what a key's decisions share a call by: its Redis Cluster slot; 0 for
  // every key on one server.
  virtual int SlotOf(std::string_view redis_key) const = 0;

 protected:
  ~Dispatcher() = default;
};

// What the batcher asks the topology when a call cannot be answered by Redis's decisions:
// on the error paths only, never per decision on the batching path. I/O thread.
class CallErrors {
 public:
  // The error for units left on a lane that is not connected.
  virtual absl::Status NotConnected(const Node& node) = 0;
  // A cluster's redirect or refusal of a call (the script did not run, so sending it
  // again cannot count a decision twice): true when it took the chunk to send again.
  virtual bool Redirected(Lane& lane, std::string_view error, std::vector<UnitPtr>& chunk) = 0;
  // Decisions timed out on `lane` while its server sat silent on its calls (a stopped or
  // stalled server, not our own backlog). A cluster looks at its slot map again: the
  // node's replica may have been promoted while the connection stays up (issue 37).
  virtual void ServerSilent(Lane&) {}

 protected:
  ~CallErrors() = default;
};

}  // namespace floodgate::redis

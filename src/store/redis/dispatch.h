// The one call through which the store's parts hand a unit back to be sent (routed, admitted by a breaker, queued).
#pragma once

#include "store/redis/unit.h"

namespace floodgate::redis {

// Implemented by the store. A virtual call per unit a multi-decision sends (and per
// batch its router hands back), never per decision on a lane's batching path.
class Dispatcher {
 public:
  // Any thread.
  virtual void Dispatch(UnitPtr unit, Steady::time_point now) = 0;

 protected:
  ~Dispatcher() = default;
};

}  // namespace floodgate::redis

#pragma once

// wait_replicas: a script call answered only once WAIT says enough replicas have its writes.

#include <floodgate/redis_store.h>

#include <string_view>

#include "store/redis/connection.h"

namespace floodgate::redis {

// Sends `call`, then WAIT <options.wait_replicas> <timeout> in the same write, and hands
// `handler` the call's reply once WAIT has answered: an error (Unavailable) instead when
// fewer replicas acknowledged it, so that every answer not degraded survives a failover;
// WAIT's own error when it refused (a replica does: Redis Sentinel sends WAIT 0 behind
// every call so that even a denial, which writes nothing, is never taken from a server
// demoted under a live connection). docs/stores.md, "Redis Sentinel". I/O thread.
void SendAcknowledged(Connection& connection, std::string_view call,
                      const RedisStoreOptions& options, std::string_view describe,
                      ReplyHandler handler);

}  // namespace floodgate::redis

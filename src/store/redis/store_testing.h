#pragma once

// Tests only: a Redis store opened with a capability forced instead of detected.

#include <absl/status/statusor.h>
#include <floodgate/redis_store.h>

#include <memory>
#include <optional>

#include "store/redis/scripts.h"

namespace floodgate::redis {

struct StoreTesting {
  // RedisStore::Open, with every connection's Batching taken as `forced_batching` (when
  // given) instead of what its handshake found: kPerSlot is a cluster of Redis < 7.0.
  static absl::StatusOr<std::unique_ptr<RedisStore>> Open(RedisStoreOptions options,
                                                          std::optional<Batching> forced_batching);
};

}  // namespace floodgate::redis

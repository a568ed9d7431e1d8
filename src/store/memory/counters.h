#pragma once

// memory://'s envoyproxy/ratelimit counters: integers with a TTL, as Redis keeps upstream's keys.

#include <absl/container/flat_hash_map.h>
#include <floodgate/store.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

namespace floodgate::memory {

// Store::Count on memory (docs/envoy.md, "Shared counters"): what INCRBY + EXPIRE do to a Redis
// key, the TTL in whole seconds from the request's now. Kept apart from the shards' entries: a
// counter is a plain integer whose key is upstream's, not a policy's state. Bounded by
// `max_keys` (the store's bound): past it expired counters go first, then any (counted as an
// eviction; a counter dropped early counts from 0 again, as after Redis' own eviction).
// Thread-safe: sharded locks.
class Counters {
 public:
  explicit Counters(std::size_t max_keys)
      : per_shard_(std::max<std::size_t>(1, max_keys / kShards)) {}

  CountAnswer Count(const CountRequest& request, std::int64_t now_us);
  // Counters held, and the live ones dropped to stay under the bound.
  std::uint64_t size();
  std::uint64_t evictions();

 private:
  static constexpr std::size_t kShards = 16;
  struct Counter {
    std::int64_t value = 0;
    std::int64_t expires_us = 0;
  };
  struct Shard {
    std::mutex mu;
    absl::flat_hash_map<std::string, Counter> counters;
    std::uint64_t evictions = 0;
  };
  void MakeRoom(Shard& shard, std::int64_t now_us);

  const std::size_t per_shard_;
  std::array<Shard, kShards> shards_;
};

}  // namespace floodgate::memory

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
// counter is a plain integer whose key is upstream's, not a policy's state. Bounded on its own
// by the store's `max_keys` counters: past it expired counters go first, then any (counted as
// an eviction; a counter dropped early counts from 0 again, as after Redis' own eviction).
// Bounded by `max_bytes` too (a counter costs its key's length plus kEntryBytes), as the
// store's keys are: upstream's keys run to kMaxCounterKeyBytes. Thread-safe: sharded locks.
class Counters {
 public:
  static constexpr std::size_t kEntryBytes = 64;  // a map slot, the string's header, the counter

  Counters(std::size_t max_keys, std::size_t max_bytes)
      : per_shard_(std::max<std::size_t>(1, max_keys / kShards)),
        bytes_per_shard_(std::max<std::size_t>(kMaxCounterKeyBytes + kEntryBytes,
                                               max_bytes / kShards)) {}

  CountAnswer Count(const CountRequest& request, std::int64_t now_us);
  // Counters held, and the live ones dropped to stay under the bound.
  std::uint64_t size();
  std::uint64_t evictions();
  std::uint64_t bytes();

 private:
  static constexpr std::size_t kShards = 16;
  struct Counter {
    std::int64_t value = 0;
    std::int64_t expires_us = 0;
  };
  struct Shard {
    std::mutex mu;
    absl::flat_hash_map<std::string, Counter> counters;
    std::size_t bytes = 0;
    std::uint64_t evictions = 0;
  };
  // Room for a counter of `cost` bytes: the expired go, then any.
  void MakeRoom(Shard& shard, std::size_t cost, std::int64_t now_us);
  bool Full(const Shard& shard, std::size_t cost) const {
    return shard.counters.size() >= per_shard_ || shard.bytes + cost > bytes_per_shard_;
  }

  const std::size_t per_shard_;
  const std::size_t bytes_per_shard_;
  std::array<Shard, kShards> shards_;
};

}  // namespace floodgate::memory

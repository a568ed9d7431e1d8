#pragma once

// The Redis store's counters, shared by its parts and read by RedisStore::redis_stats.

#include <atomic>
#include <cstdint>

namespace floodgate::redis {

struct Counters {
  std::atomic<std::uint64_t> calls{0}, batched{0}, errors{0}, timeouts{0}, degraded{0},
      denial_cache_hits{0}, noscript{0}, reconnects{0}, moved{0}, asked{0}, retried{0},
      refreshes{0}, multi{0}, cross_slot{0}, releases{0}, release_failures{0},
      primary_switches{0};
};

}  // namespace floodgate::redis

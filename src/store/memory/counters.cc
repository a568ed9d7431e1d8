// memory://'s envoyproxy/ratelimit counters (see counters.h).

#include "store/memory/counters.h"

#include <absl/hash/hash.h>

namespace floodgate::memory {

CountAnswer Counters::Count(const CountRequest& request, std::int64_t now_us) {
  // absl's own string_view: the map's heterogeneous lookup takes no std::string_view here.
  const absl::string_view key(request.key.data(), request.key.size());
  Shard& shard = shards_[absl::HashOf(key) % kShards];
  std::lock_guard lock(shard.mu);
  auto it = shard.counters.find(key);
  const bool live = it != shard.counters.end() && it->second.expires_us > now_us;
  if (request.ttl.count() == 0) return CountAnswer{live ? it->second.value : 0, false};  // GET
  if (it == shard.counters.end()) {
    const std::size_t cost = key.size() + kEntryBytes;
    if (Full(shard, cost)) MakeRoom(shard, cost, now_us);
    it = shard.counters.emplace(std::string(request.key), Counter{}).first;
    shard.bytes += cost;
  } else if (!live) {
    it->second.value = 0;
  }
  // EXPIRE's seconds from now, as Redis keeps them (to the millisecond; whole seconds here).
  it->second.value += request.hits;
  it->second.expires_us =
      now_us + std::chrono::duration_cast<std::chrono::microseconds>(request.ttl).count();
  return CountAnswer{it->second.value, false};
}

void Counters::MakeRoom(Shard& shard, std::size_t cost, std::int64_t now_us) {
  absl::erase_if(shard.counters, [&](const auto& entry) {
    if (entry.second.expires_us > now_us) return false;
    shard.bytes -= entry.first.size() + kEntryBytes;
    return true;
  });
  while (Full(shard, cost) && !shard.counters.empty()) {
    shard.bytes -= shard.counters.begin()->first.size() + kEntryBytes;
    shard.counters.erase(shard.counters.begin());
    ++shard.evictions;
  }
}

std::uint64_t Counters::bytes() {
  std::uint64_t total = 0;
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mu);
    total += shard.bytes;
  }
  return total;
}

std::uint64_t Counters::size() {
  std::uint64_t total = 0;
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mu);
    total += shard.counters.size();
  }
  return total;
}

std::uint64_t Counters::evictions() {
  std::uint64_t total = 0;
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mu);
    total += shard.evictions;
  }
  return total;
}

}  // namespace floodgate::memory

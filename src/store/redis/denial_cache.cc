// The denial cache: Redis's denials answered locally until their retry_after lapses.

#include "store/redis/denial_cache.h"

#include <absl/hash/hash.h>

#include "common/strings.h"

namespace floodgate::redis {

namespace {

std::chrono::microseconds CeilMicros(DenialCache::Clock::duration d) {
  return std::chrono::ceil<std::chrono::microseconds>(d);
}

}  // namespace

DenialCache::Shard& DenialCache::ShardFor(std::string_view key) {
  return shards_[absl::Hash<absl::string_view>{}(ToAbsl(key)) % kShards];
}

std::optional<Decision> DenialCache::Lookup(std::string_view key, const Policy& policy,
                                            std::int64_t cost, Clock::time_point now) {
  Shard& shard = ShardFor(key);
  std::lock_guard lock(shard.mu);
  auto it = shard.denials.find(ToAbsl(key));
  if (it == shard.denials.end()) return std::nullopt;
  const Denial& denial = it->second;
  if (now >= denial.retry_at) {
    shard.denials.erase(it);
    return std::nullopt;
  }
  if (denial.cost != cost || !(denial.policy == policy)) return std::nullopt;
  Decision d;
  d.allowed = false;
  d.limit = policy.limit;
  d.remaining = denial.remaining;
  d.retry_after = CeilMicros(denial.retry_at - now);
  d.reset_after = std::max(d.retry_after, CeilMicros(denial.reset_at - now));
  d.delayable = policy.delay.count() > 0;  // a denial under delay= waits retry_after - nothing
  return d;
}

void DenialCache::Insert(const std::string& key, const Policy& policy, std::int64_t cost,
                         const Decision& decision, Clock::time_point now) {
  if (decision.retry_after.count() <= 0) return;  // -1: never fits; nothing lapses
  // A blocked answer: its retry_after is max(the block's end, the algorithm's wait), so
  // when the block ends, and the answers stop being `blocked`, is not known here. Redis
  // answers those (a block's requests are denied there without a charge).
  if (decision.blocked) return;
  Shard& shard = ShardFor(key);
  std::lock_guard lock(shard.mu);
  if (shard.denials.size() >= per_shard_ && !shard.denials.contains(ToAbsl(key))) {
    // Full: drop one entry (an arbitrary one; the cache only saves round trips).
    shard.denials.erase(shard.denials.begin());
  }
  shard.denials.insert_or_assign(
      key, Denial{policy, cost, decision.remaining, now + decision.retry_after,
                  now + decision.reset_after});
}

void DenialCache::Erase(std::string_view key) {
  Shard& shard = ShardFor(key);
  std::lock_guard lock(shard.mu);
  shard.denials.erase(ToAbsl(key));
}

std::size_t DenialCache::size() {
  std::size_t n = 0;
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mu);
    n += shard.denials.size();
  }
  return n;
}

}  // namespace floodgate::redis

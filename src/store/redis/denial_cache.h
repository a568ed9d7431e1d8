#pragma once

// The denial cache: Redis's denials answered locally until their retry_after lapses.

#include <absl/container/flat_hash_map.h>
#include <floodgate/decision.h>
#include <floodgate/policy.h>

#include <array>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>

namespace floodgate::redis {

// Denials Redis gave, remembered until their retry_after lapses, so an abusive client's
// repeats cost no round trip. Exact for the same request (key, policy, cost): until
// retry_after passes, only other traffic could change the answer, and other traffic only
// takes capacity away. Bounded; thread-safe (sharded locks).
class DenialCache {
 public:
  using Clock = std::chrono::steady_clock;

  explicit DenialCache(std::size_t capacity)
      : per_shard_(std::max<std::size_t>(1, capacity / kShards)) {}

  std::optional<Decision> Lookup(std::string_view key, const Policy& policy, std::int64_t cost,
                                 Clock::time_point now);
  void Insert(const std::string& key, const Policy& policy, std::int64_t cost,
              const Decision& decision, Clock::time_point now);
  // Forgets the key's denial: an operation (a reset, a refund) may have made room.
  void Erase(std::string_view key);
  std::size_t size();

 private:
  static constexpr std::size_t kShards = 16;
  struct Denial {
    Policy policy;
    std::int64_t cost;
    std::int64_t remaining;
    Clock::time_point retry_at;
    Clock::time_point reset_at;
  };
  struct Shard {
    std::mutex mu;
    absl::flat_hash_map<std::string, Denial> denials;
  };
  Shard& ShardFor(std::string_view key);

  const std::size_t per_shard_;
  std::array<Shard, kShards> shards_;
};

}  // namespace floodgate::redis

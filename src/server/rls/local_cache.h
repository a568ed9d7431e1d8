#pragma once

// Upstream's local over-limit cache (LOCAL_CACHE_SIZE_IN_BYTES): keys over their limit, per process.

#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace floodgate::server::rls {

// A counter key found over its limit, remembered until its unit has passed (upstream's
// base_limiter.go sets freecache's TTL to the unit's seconds), so its repeats are answered
// OVER_LIMIT without the store. Bounded by `bytes`: a key costs its length plus kEntryBytes;
// past the bound the expired keys go, then any (a key forgotten early only costs a store
// call). Thread-safe. Times are Unix seconds, the clock upstream's keys are made by.
class LocalCache {
 public:
  static constexpr std::size_t kEntryBytes = 48;  // a map slot and the string's header

  explicit LocalCache(std::size_t bytes) : bytes_(bytes) {}

  bool enabled() const { return bytes_ > 0; }
  bool Contains(std::string_view key, std::int64_t now_s);
  void Insert(std::string_view key, std::int64_t expires_s, std::int64_t now_s);
  std::size_t used_bytes();

 private:
  const std::size_t bytes_;
  std::mutex mu_;
  absl::flat_hash_map<std::string, std::int64_t> keys_;  // key -> expiry (Unix s)
  std::size_t used_ = 0;
};

}  // namespace floodgate::server::rls

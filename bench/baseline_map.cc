// The bare baseline the memory store is measured against: gcra in a flat hash map.

#include "baseline_map.h"

#include <absl/container/flat_hash_map.h>
#include <absl/hash/hash.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "common/spin_lock.h"  // the lock floodgate's shards take: the fastest we know

namespace floodgate::bench {

namespace {

constexpr std::int64_t kEmissionUs = 1000;          // gcra:1000/1s
constexpr std::int64_t kToleranceUs = 1000 * 1000;  // burst 1000

// The key's hash is computed once and reused by the map, as floodgate does: hashing
// twice is avoidable work, and the baseline must not carry any.
struct Prehashed {
  std::string_view key;
  std::size_t hash;
};

std::size_t HashOf(std::string_view key) {
  return absl::Hash<absl::string_view>{}(absl::string_view(key.data(), key.size()));
}

struct KeyHash {
  using is_transparent = void;
  std::size_t operator()(const std::string& s) const { return HashOf(s); }
  std::size_t operator()(const Prehashed& p) const { return p.hash; }
};
struct KeyEq {
  using is_transparent = void;
  bool operator()(const std::string& a, const std::string& b) const { return a == b; }
  bool operator()(const std::string& a, const Prehashed& b) const { return a == b.key; }
  bool operator()(const Prehashed& a, const std::string& b) const { return a.key == b; }
};

}  // namespace

struct alignas(64) BaselineMap::Shard {
  SpinLock mu;
  absl::flat_hash_map<std::string, std::int64_t, KeyHash, KeyEq> map;
};

BaselineMap::BaselineMap() : shards_(std::make_unique<Shard[]>(256)) {}
BaselineMap::~BaselineMap() = default;

bool BaselineMap::Decide(std::string_view key) {
  const std::size_t hash = HashOf(key);
  Shard& shard = shards_[hash >> 56];
  std::lock_guard lock(shard.mu);
  auto it = shard.map.find(Prehashed{key, hash});
  if (it == shard.map.end()) it = shard.map.emplace(std::string(key), 0).first;
  const std::int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  const std::int64_t next = std::max(it->second, now) + kEmissionUs;
  if (next - now > kToleranceUs) return false;
  it->second = next;
  return true;
}

std::size_t BaselineMap::size() const {
  std::size_t n = 0;
  for (int i = 0; i < 256; ++i) {
    std::lock_guard lock(shards_[i].mu);
    n += shards_[i].map.size();
  }
  return n;
}

}  // namespace floodgate::bench

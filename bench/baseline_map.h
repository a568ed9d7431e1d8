#pragma once

// The bar floodgate's memory store is measured against (bench/baseline_map.cc).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace floodgate::bench {

// Only the unavoidable work of one gcra decision, done as fast as we know how: hash the
// key, take one of 256 shards' spin locks (src/common/spin_lock.h), find-or-insert it in an abseil
// flat_hash_map<std::string, int64_t>, read the clock, decide (tat against the burst
// tolerance) and store the new tat when admitted. No policy object, no expiry, no bound,
// no validation, no remaining count.
class BaselineMap {
 public:
  BaselineMap();
  ~BaselineMap();
  BaselineMap(const BaselineMap&) = delete;
  BaselineMap& operator=(const BaselineMap&) = delete;

  // Whether the decision admitted; the compiler cannot drop the work.
  bool Decide(std::string_view key);
  std::size_t size() const;

 private:
  struct Shard;
  std::unique_ptr<Shard[]> shards_;  // 256
};

}  // namespace floodgate::bench

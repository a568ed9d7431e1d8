#pragma once

// The bar floodgate's memory store is measured against (bench/baseline_map.cc).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace floodgate::bench {

// Only the unavoidable work of one gcra decision: hash the key, lock one of 256 shards,
// find-or-insert it in an abseil flat_hash_map<std::string, int64_t>, read the clock,
// update the value. No policy, no expiry, no bound, no validation.
class BaselineMap {
 public:
  BaselineMap();
  ~BaselineMap();
  BaselineMap(const BaselineMap&) = delete;
  BaselineMap& operator=(const BaselineMap&) = delete;

  // Returns the stored value, so the compiler cannot drop the work.
  std::int64_t Decide(std::string_view key);
  std::size_t size() const;

 private:
  struct Shard;
  std::unique_ptr<Shard[]> shards_;  // 256
};

}  // namespace floodgate::bench

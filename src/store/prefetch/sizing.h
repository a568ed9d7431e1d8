#pragma once

// Lease sizes for prefetch=N and prefetch=auto, and which keys are hot enough to lease for.

#include <floodgate/policy.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace floodgate::prefetch {

using Steady = std::chrono::steady_clock;

// prefetch=auto never leases more than this fraction of the policy's smaller of limit and
// capacity (docs/prefetch_client.md, "auto"): an instance that dies holding a lease takes
// at most 1/16 of the limit with it until the lease ends.
inline constexpr std::int64_t kAutoCapDivisor = 16;
// An auto lease starts at this size and doubles while leases drain before they end.
inline constexpr std::int64_t kAutoFirstLease = 8;
// A key is hot, and worth a lease under auto, once it is seen this many times within one
// prefetch_ttl; a key seen less often is decided per request (as without prefetch).
inline constexpr std::uint32_t kHotHits = 8;

// The largest lease prefetch=auto asks for under `policy`.
inline std::int64_t AutoCap(const Policy& policy) {
  return std::max<std::int64_t>(1, std::min(policy.limit, policy.capacity()) / kAutoCapDivisor);
}

// The first lease a key asks for.
inline std::int64_t FirstLeaseSize(const Policy& policy) {
  if (policy.prefetch == Prefetch::kFixed) return policy.prefetch_units;
  return std::min(kAutoFirstLease, AutoCap(policy));
}

// How a lease ended, for sizing the next one.
enum class LeaseEnd : std::uint8_t {
  kDrained,  // every unit spent before the lease's end: the key wants more per lease
  kExpired,  // the lease ended with units left (returned)
};

// The next lease's size after a lease of `units` ended with `used` spent; 0 means the key
// is no longer hot (auto: decided per request until it is hot again). prefetch=N always
// asks for N.
inline std::int64_t NextLeaseSize(const Policy& policy, std::int64_t size, LeaseEnd end,
                                  std::int64_t units, std::int64_t used) {
  if (policy.prefetch != Prefetch::kAuto) return size;
  if (end == LeaseEnd::kDrained)
    return std::min(AutoCap(policy), std::max<std::int64_t>(size, 1) * 2);
  if (used < 2) return 0;  // a lease for one request or none saves no call
  // Came back at least half unused: ask for about what was spent, with room to grow.
  if (used * 2 <= units) return std::min(AutoCap(policy), std::max<std::int64_t>(2, used * 2));
  return size;
}

// Which keys are hot: a fixed table of slots, each counting one key hash's hits within a
// period; a key hit kHotHits times within the period is hot. Rare keys overwrite each
// other's slots, so a spread of cold keys costs no memory and no allocation.
// Not thread-safe (each shard of the budget table has its own).
class HotKeys {
 public:
  explicit HotKeys(std::size_t slots) : slots_(slots) {}

  // Counts a hit of the key whose hash is `hash`; true when it is hot.
  bool Hit(std::size_t hash, Steady::time_point now, std::chrono::microseconds period) {
    Slot& slot = slots_[(hash >> 7) % slots_.size()];  // the low bits chose the shard
    if (slot.hash != hash || now - slot.since > period) {
      slot = Slot{hash, now, 0};
    }
    return ++slot.hits >= kHotHits;
  }

 private:
  struct Slot {
    std::size_t hash = 0;
    Steady::time_point since;
    std::uint32_t hits = 0;
  };
  std::vector<Slot> slots_;
};

}  // namespace floodgate::prefetch

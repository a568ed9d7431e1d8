// envoyproxy/ratelimit's counting, pure (see upstream_counter.h).

#include "server/rls/upstream_counter.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace floodgate::server::rls {

std::string CounterKey(std::string_view prefix, std::string_view domain,
                       const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& d,
                       std::int64_t now_s, std::int64_t unit_s) {
  std::string key(prefix);
  key.append(domain).push_back('_');
  for (const auto& entry : d.entries()) {
    key.append(entry.key()).push_back('_');
    key.append(entry.value()).push_back('_');
  }
  key += std::to_string((now_s / unit_s) * unit_s);
  return key;
}

std::int64_t CounterTtl(std::int64_t unit_s, std::int64_t jitter_max_s, double random) {
  if (jitter_max_s <= 0) return unit_s;
  const auto jitter = static_cast<std::int64_t>(random * static_cast<double>(jitter_max_s));
  return unit_s + std::clamp<std::int64_t>(jitter, 0, jitter_max_s - 1);
}

std::uint64_t HitsToAdd(bool stop_when_over, std::uint64_t hits, bool any_local_over,
                        bool any_would_exceed, bool this_would_exceed) {
  if (!stop_when_over) return hits;
  if (any_local_over) return 0;
  if (!any_would_exceed) return hits;
  return this_would_exceed ? hits : 0;
}

CountVerdict Judge(std::uint32_t limit, std::int64_t after_count, std::uint64_t hits,
                   bool local_over, bool shadow, float near_limit_ratio) {
  CountVerdict v;
  if (local_over) {
    v.over = true;
    v.over_limit = hits;
    v.over_limit_with_local_cache = hits;
    if (shadow) v.shadow_mode = hits;
    return v;
  }
  const std::uint64_t over_threshold = limit;
  // float32(limit) * NEAR_LIMIT_RATIO in float32, then floored, as upstream computes it.
  const auto near_threshold = static_cast<std::uint64_t>(
      std::floor(static_cast<double>(static_cast<float>(limit) * near_limit_ratio)));
  const auto after = static_cast<std::uint64_t>(std::max<std::int64_t>(0, after_count));
  const std::uint64_t before = after - hits;  // wraps when less was added, as in Go
  if (after > over_threshold) {
    v.over = true;
    v.cache_locally = true;
    if (before >= over_threshold) {
      v.over_limit = hits;
    } else {
      v.over_limit = after - over_threshold;
      v.near_limit = over_threshold - std::max(near_threshold, before);
    }
    if (shadow) v.shadow_mode = before >= over_threshold ? hits : after - over_threshold;
    return v;
  }
  v.remaining = static_cast<std::uint32_t>(over_threshold - after);
  if (after > near_threshold) {
    v.near_limit = before >= near_threshold ? hits : after - near_threshold;
  }
  v.within_limit = hits;
  return v;
}

}  // namespace floodgate::server::rls

#pragma once

// envoyproxy/ratelimit's counting, pure: its keys, its TTLs, and what a count answers.
//
// docs/envoy.md, "Shared counters". Read from upstream's src/limiter/cache_key.go,
// src/limiter/base_limiter.go and src/redis/fixed_cache_impl.go at commit f2fb15770f7f; the
// engine (engine.cc) sends the counts through Store::Count and answers with these.

#include <cstdint>
#include <string>
#include <string_view>

#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace floodgate::server::rls {

// cache_key.go: CACHE_KEY_PREFIX + domain + '_' + (key + '_' + value + '_') per entry + the
// window start (Unix seconds, `now_s` rounded down to the unit's seconds), byte for byte.
std::string CounterKey(std::string_view prefix, std::string_view domain,
                       const ::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor& d,
                       std::int64_t now_s, std::int64_t unit_s);

// fixed_cache_impl.go: the unit's seconds, plus rand.Int63n(jitter_max_s) when jitter_max_s > 0
// (`random` uniform in [0, 1)).
std::int64_t CounterTtl(std::int64_t unit_s, std::int64_t jitter_max_s, double random);

// fixed_cache_impl.go's getHitsAddend under STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: a request
// with a key over in the local cache adds nothing to its other keys; one whose keys' counts
// (read first) would go over with this request adds only to those keys.
std::uint64_t HitsToAdd(bool stop_when_over, std::uint64_t hits, bool any_local_over,
                        bool any_would_exceed, bool this_would_exceed);

// What one count answers (base_limiter.go's GetResponseDescriptorStatus) and the stats it adds.
struct CountVerdict {
  bool over = false;           // OVER_LIMIT, before shadow mode answers it OK
  std::uint32_t remaining = 0;
  std::uint64_t over_limit = 0;
  std::uint64_t near_limit = 0;
  std::uint64_t within_limit = 0;
  std::uint64_t shadow_mode = 0;
  std::uint64_t over_limit_with_local_cache = 0;
  bool cache_locally = false;  // over: the key joins the local cache
};
// `after`: the count the store answered (the key's after this request's hits, or as it stood
// when the request added less); `hits`: the request's hits_addend, what upstream subtracts to
// find the count before (wrapping as Go's uint64 does, which only its stats see).
CountVerdict Judge(std::uint32_t limit, std::int64_t after, std::uint64_t hits, bool local_over,
                   bool shadow, float near_limit_ratio);

}  // namespace floodgate::server::rls

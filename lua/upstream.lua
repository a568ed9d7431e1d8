-- Driver: envoyproxy/ratelimit's counters (docs/envoy.md, "Shared counters"), alone: no common.lua.
--
-- KEYS = upstream's keys (CACHE_KEY_PREFIX + domain_key_value_..._windowstart), as they are;
-- ARGV = per key: hits, ttl_s (ttl_s '': only read, as upstream's GET).
-- Returns per key the count after: INCRBY key hits, then EXPIRE key ttl_s, as upstream's
-- src/redis/fixed_cache_impl.go pipelines them (commit f2fb15770f7f), here in one script, so
-- no other client's command falls between a key's two. The layouts of every driver:
-- src/store/redis/script_layout.h, lua/README.md.
if #ARGV ~= 2 * #KEYS or #KEYS == 0 then
  return redis.error_reply('floodgate: expected n keys and 2n arguments (hits, ttl_s per key)')
end
for i = 1, #KEYS do
  local hits, ttl = ARGV[2 * i - 1], ARGV[2 * i]
  if not string.match(hits, '^%d+$') or not (ttl == '' or string.match(ttl, '^[1-9]%d*$')) then
    return redis.error_reply('floodgate: counter ' .. i .. ': hits and ttl_s must be decimal')
  end
end
local counts = {}
for i = 1, #KEYS do
  local ttl = ARGV[2 * i]
  if ttl == '' then
    counts[i] = tonumber(redis.call('GET', KEYS[i]) or '0')
  else
    counts[i] = redis.call('INCRBY', KEYS[i], ARGV[2 * i - 1])
    redis.call('EXPIRE', KEYS[i], ttl)
  end
end
return counts

-- A bare lease acquire on a sorted set: the floor bench/reserve_bench.py measures against.
--
-- The least Lua that acquires leases on the sorted set the issue prescribes (docs/leases.md:
-- one member per lease, scored by its acquire time) and keeps nothing else: no record per
-- lease, so a release must be handed the key, the member and the acquire time (the lease
-- id would carry them). With bench/bare_release_cc.lua, the floor that any acquire +
-- release keeping that sorted set pays on this Redis, against bench/bare_batch_gcra.lua's
-- check (bench/reserve_bench.py). Not loaded by floodgate, whose lease ids carry the same
-- (lua/concurrency.lua), its member also saying the lease's T and N.
--
--   KEYS = the concurrency keys; ARGV = {N, T (µs), n x the member's random part}
-- Reply: 7 integers per acquire (done, allowed, limit, remaining, retry_after_us,
-- reset_after_us, the acquire time: the member is the random part and that time), then
-- the clock. The same rule as lua/concurrency.lua: now clamped to the newest lease, the
-- leases at or before now - T dropped, admitted while fewer than N are left; an admitted
-- acquire adds its member and sets the key's TTL to T. Left out, as a floor may:
-- validation, now other than the server clock, a denial's retry (the k-th oldest lease).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, period = tonumber(ARGV[1]), tonumber(ARGV[2])
local ttl = string.format('%d', math.ceil(period / 1000))
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local at = now
  local newest = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
  local newest_time = tonumber(newest[2])
  if newest_time and newest_time > at then at = newest_time end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', at - period))
  local count = redis.call('ZCARD', key)
  local o = 7 * i
  if count < limit then
    local score = string.format('%d', at)
    redis.call('ZADD', key, score, ARGV[2 + i] .. score)
    redis.call('PEXPIRE', key, ttl)
    out[o - 6], out[o - 5], out[o - 4], out[o - 3], out[o - 2], out[o - 1], out[o] =
        1, 1, limit, limit - count - 1, 0, period, at
  else
    out[o - 6], out[o - 5], out[o - 4], out[o - 3], out[o - 2], out[o - 1], out[o] =
        1, 0, limit, 0, 1, newest_time + period - at, 0
  end
end
out[#out + 1] = now
return out

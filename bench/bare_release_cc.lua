-- A bare lease release on a sorted set: the floor bench/reserve_bench.py measures against.
--
-- It releases bench/bare_acquire_cc.lua's leases (see there), with no record to read or delete.
--
--   KEYS = the concurrency keys; ARGV = {N, T (µs), n x (member, acquire time)}
-- Reply: 6 integers per release (done: 0 when no such lease is held; allowed, limit,
-- remaining, retry_after_us, reset_after_us: the key's peek), then the clock. As
-- lua/concurrency.lua: the lease leaves, now is clamped to the newest lease (the one
-- released included), the leases at or before now - T are dropped, and the peek counts
-- what is left. Left out, as a floor may: validation, now other than the server clock,
-- a lease already expired (it is simply removed).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit, period = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local o = 6 * i
  if redis.call('ZREM', key, ARGV[1 + 2 * i]) == 0 then
    out[o - 5], out[o - 4], out[o - 3], out[o - 2], out[o - 1], out[o] = 0, 0, 0, 0, 0, 0
  else
    local at = tonumber(ARGV[2 + 2 * i])
    if now > at then at = now end
    local newest = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
    local newest_time = tonumber(newest[2])
    if newest_time and newest_time > at then at = newest_time end
    local count, reset = 0, 0
    if newest_time and newest_time > at - period then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', at - period))
      count, reset = redis.call('ZCARD', key), newest_time + period - at
    end
    out[o - 5], out[o - 4], out[o - 3], out[o - 2], out[o - 1], out[o] =
        1, 1, limit, limit - count, 0, reset
  end
end
out[#out + 1] = now
return out

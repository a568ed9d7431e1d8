-- sliding_log: algorithms.md, "sliding_log (exact sliding window; one entry per
-- admitted unit)"; the same decisions as DecideSlidingLog in src/core/windows.cc.
--
-- State: a sorted set, one member per admitted unit, score = its time in µs. Members at
-- one µs must all be kept (algorithms.md), so a member is '<t>:<n>' with n numbering the
-- units at score t; all units at t share the score and leave together, so the count
-- at t is always the largest n in use and the next n never collides.
--
-- An entry admitted at s counts at now iff s > now - P: an entry exactly P old no longer
-- counts, so every decision first drops the entries with score <= now - P (inclusive
-- bound), peeks and denials included. That trim is a write, but it is the state
-- src/core keeps (DecideSlidingLog drops through now - P on every call): once a decision
-- at a later now has dropped an entry, a request whose time went backwards must not
-- count it again. With time moving forward the trim is invisible to every decision.

-- ZADD arguments per call: redis.call(unpack(...)) is bounded by the Lua C stack.
local SL_ZADD_CHUNK = 1000

DECIDERS['sl'] = function(key, now, limit, period, burst, cost)
  -- Time going backwards is clamped to the newest entry (counted or not), so entries
  -- stay in time order and waits are never negative.
  local newest = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
  if newest[2] then
    local t = tonumber(newest[2])
    if t > now then now = t end
  end
  -- Removing the last member deletes the key: an empty log is fresh.
  redis.call('ZREMRANGEBYSCORE', key, '-inf', FG.int_string(now - period))
  local count = redis.call('ZCARD', key)

  local allowed = cost == 0 or count + cost <= limit
  if allowed and cost > 0 then
    local at = FG.int_string(now)
    local n = redis.call('ZCOUNT', key, at, at)
    local args = {}
    for i = 1, cost do
      n = n + 1
      args[#args + 1] = at
      args[#args + 1] = at .. ':' .. FG.int_string(n)
      if #args >= 2 * SL_ZADD_CHUNK or i == cost then
        redis.call('ZADD', key, unpack(args))
        args = {}
      end
    end
    count = count + cost
    -- The newest counted entry is now: reset = TTL = P (algorithms.md: keys expire
    -- after P).
    FG.expire(key, period)
    return FG.result(true, limit - count, 0, period)
  end

  local retry = 0
  if not allowed then
    if cost > limit then
      retry = -1  -- can never fit
    else
      -- Enough entries must leave: the k-th oldest counted one, k = count + c - L
      -- (1 <= k <= count here), stops counting P after it was admitted.
      local k = FG.int_string(count + cost - limit - 1)
      local kth = redis.call('ZRANGE', key, k, k, 'WITHSCORES')
      retry = tonumber(kth[2]) + period - now
    end
  end
  -- reset: P after the newest counted entry, or 0 when none counts. When any counts,
  -- the newest entry is counted (the trim only removed older ones), and the key's TTL,
  -- set when that entry was admitted, still ends at the same instant.
  local reset = 0
  if count > 0 then reset = tonumber(newest[2]) + period - now end
  return FG.result(allowed, limit - count, retry, reset)
end

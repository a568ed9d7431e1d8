-- concurrency (docs/leases.md): the leases held on a key, decided as a sliding log of leases.
--
-- A lease counts from its acquire s while s > now - T (T the lease time): docs/algorithms.md's
-- "sliding_log (exact sliding window)" with L = N and P = T, each lease one unit, so the same
-- decisions as lua/sliding_log.lua and DecideSlidingLog in src/core/sliding_log.cc, which memory://
-- runs for this kind too.
--
-- State: a sorted set with one member per lease, scored by its acquire time. The member
-- is the lease itself: '<16 random characters>.<T>.<N>.<acquire time>' (LEASE_MEMBER),
-- which the lease's id carries with the key (src/store/redis), so a release needs no
-- record: its ZREM finds the member or nothing, and a member it found, being one this
-- script wrote, says the lease's T, N and acquire time truly. A sliding log numbers its
-- runs so that a run of many units is one member; a lease is always one unit, so its
-- member needs no number, and a release is one ZREM wherever the lease sits (a log's
-- run in the middle would renumber every later one). Every decision first drops the
-- leases acquired at or before now - T, as the sliding log drops its runs.
SORTED_SET['cc'] = true

-- How many leases a trimmed key holds: none when its newest lease (newest_time, nil
-- when it has none) no longer counts, for the trim then emptied it. (Written out in
-- cc_acquire and cc_release, below, with trim_log's steps: see trim_log.)
local function cc_held(key, newest_time, now, period)
  if newest_time and newest_time > now - period then return redis.call('ZCARD', key) end
  return 0
end

-- The key's leases at `now` (clamped to the newest acquire, as the sliding log clamps to
-- its newest run, so waits are never negative): the clamped now, how many count after the
-- trim, and the newest acquire time (nil when the key holds none).
local function cc_count(key, now, period)
  local _, newest_time
  now, _, newest_time = trim_log(key, now, period)
  return now, cc_held(key, newest_time, now, period), newest_time
end

-- reset: T after the newest lease, or 0 when none counts.
local function cc_reset(count, newest_time, now, period)
  if count > 0 then return newest_time + period - now end
  return 0
end

-- A peek (cost 0). A lease is taken by cc_acquire, under its id, never by a cost: the
-- C++ side sends concurrency keys a cost only as an acquire (lua/reservation.lua).
DECIDERS['cc'] = function(key, now, p, cost)
  if cost ~= 0 then
    error(redis.error_reply('floodgate: a concurrency key takes leases (acquire), not a cost'))
  end
  local count, newest_time
  now, count, newest_time = cc_count(key, now, p.period)
  return result(true, p.limit - count, 0, cc_reset(count, newest_time, now, p.period))
end

-- A lease's member: its random part (the caller's: 16 characters, no dot), T, N, and its
-- acquire time.
local LEASE_MEMBER = '^[^.]+%.(%d+)%.(%d+)%.(%d+)$'
PREPARE['cc'] = function(p)
  p.lease_middle = '.' .. int_string(p.period) .. '.' .. int_string(p.limit) .. '.'
  p.lease_px = int_string(ceil(p.period / 1000))  -- the key's TTL after an acquire: T
end

-- The acquire and the release below run once per request, and a Lua function call costs
-- Redis 500 to 1,500 instructions here, more as it returns more values (callgrind'd
-- redis-server; a whole acquire + release is about 84,000): so each is one function,
-- with the trim (trim_log), count, peek and TTL steps of the helpers written out, and
-- returns lua/reservation.lua's 7 values itself.

-- An acquire: admitted when fewer than N leases are held (the sliding log's decision at
-- cost 1), and then the lease is the member `random` .. '.T.N.' .. its acquire time.
-- Returns 1, allowed, N, remaining, retry_after, reset_after, the acquire time (0 when
-- denied).
local function cc_acquire(key, now, p, random)
  local limit, period = p.limit, p.period
  local newest_time = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
  local count = 0
  if newest_time then
    if newest_time > now then now = newest_time end
    redis.call('ZREMRANGEBYSCORE', key, '(-inf', format('%d', now - period))
    if newest_time > now - period then count = redis.call('ZCARD', key) end
  end
  if count < limit then
    local at = format('%d', now)
    redis.call('ZADD', key, at, random .. p.lease_middle .. at)
    -- The newest lease is now: reset = TTL = T.
    redis.call('PEXPIRE', key, min_ttl_ms == 0 and p.lease_px or ttl_ms(period))
    return 1, 1, limit, limit - count - 1, 0, period, now
  end
  -- The k-th oldest lease, k = count + 1 - N, frees the place the acquire needs.
  local kth = redis.call('ZRANGE', key, int_string(count - limit), int_string(count - limit),
                         'WITHSCORES')
  local allowed, remaining, retry, reset = result(false, limit - count,
      tonumber(kth[2]) + period - now, cc_reset(count, newest_time, now, period))
  return 1, allowed, limit, remaining, retry, reset, 0
end

-- A release of the lease `member` at cost `actual` (SettleSlidingLog with the lease's one
-- unit). Only a member an acquire wrote is ever found, so what a found one says of its
-- lease (T, N, its acquire time) is what the acquire decided on, and the peek runs under
-- that T and N, as a reservation's settle runs under its record's policy. At any cost but
-- 0 it changes nothing: outcome 3 while the lease is held (core::kLeaseSettledAtACost),
-- else 0 (no such lease) or 2 (its time is over). At 0 the lease leaves, then now is
-- clamped and the key trimmed as before a decision, and the key's peek is returned. The
-- lease leaves first: the newest lease the trim then reads is the one the peek's reset
-- runs from (trimming first read it twice when the lease leaving was the newest: most
-- releases, as a key usually holds few leases). The clamp still counts the lease that
-- left, at its acquire time, as the trim before its removal would have.
local function cc_release(key, now, member, actual)
  local period, limit, at = string.match(member, LEASE_MEMBER)
  if not at then return 0, 0, 0, 0, 0, 0, 0 end  -- no acquire writes such a member
  period, limit, at = tonumber(period), tonumber(limit), tonumber(at)
  local held = at + period > now
  if actual ~= 0 then
    if not redis.call('ZSCORE', key, member) then return 0, 0, 0, 0, 0, 0, 0 end
    return held and 3 or 2, 0, 0, 0, 0, 0, 0
  end
  if redis.call('ZREM', key, member) == 0 then return 0, 0, 0, 0, 0, 0, 0 end
  -- A lease past its time counted no more: its member only waited for a trim.
  if not held then return 2, 0, 0, 0, 0, 0, 0 end
  if at > now then now = at end
  local newest_time = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
  if newest_time then
    if newest_time > now then now = newest_time end
    redis.call('ZREMRANGEBYSCORE', key, '(-inf', format('%d', now - period))
    if newest_time > now - period then
      local remaining = limit - redis.call('ZCARD', key)
      if remaining < 0 then remaining = 0 end
      return 1, 1, limit, remaining, 0, newest_time + period - now, 0
    end
  end
  return 1, 1, limit, limit, 0, 0, 0
end

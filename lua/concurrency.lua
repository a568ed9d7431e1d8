-- concurrency (docs/leases.md): the leases held on a key. A lease counts from its acquire
-- s while s > now - T (T the lease time): algorithms.md's "sliding_log" with L = N and
-- P = T, each lease one unit, so the same decisions as lua/sliding_log.lua and
-- DecideSlidingLog in src/core/windows.h, which memory:// runs for this kind too.
--
-- State: a sorted set with one member per lease, its id (the random part of its record's
-- key), scored by its acquire time. A sliding log numbers its runs so that a run of many
-- units is one member; a lease is always one unit, so its member needs no number, and a
-- release is one ZREM wherever the lease sits (a log's run in the middle would renumber
-- every later one). Every decision first drops the leases acquired at or before now - T,
-- as the sliding log drops its runs.
SORTED_SET['cc'] = true

-- How many leases a trimmed key holds: none when its newest lease (newest_time, nil
-- when it has none) no longer counts, for the trim then emptied it.
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

-- The time of the lease cc_acquire added last (MARK['cc'] reads it).
local cc_acquired_at

-- Acquires lease `id` when fewer than N are held: the sliding log's decision at cost 1.
local function cc_acquire(key, now, p, id)
  local limit, period = p.limit, p.period
  local count, newest_time
  now, count, newest_time = cc_count(key, now, period)
  if count < limit then
    redis.call('ZADD', key, int_string(now), id)
    -- The newest lease is now: reset = TTL = T.
    expire(key, period)
    cc_acquired_at = now
    return result(true, limit - count - 1, 0, period)
  end
  -- The k-th oldest lease, k = count + 1 - N, frees the place the acquire needs.
  local kth = redis.call('ZRANGE', key, int_string(count - limit), int_string(count - limit),
                         'WITHSCORES')
  return result(false, limit - count, tonumber(kth[2]) + period - now,
                cc_reset(count, newest_time, now, period))
end

-- Reservations (docs/reservations.md): an acquire is a reserve of 1; its mark is the
-- lease's acquire time.
MARK['cc'] = function(key, now, p)
  return cc_acquired_at, cc_acquired_at, 0
end

-- A release (SettleSlidingLog with the lease's one unit): now clamped and the key trimmed
-- as before a decision, the lease leaves (one already dropped by the trim leaves
-- nothing), then the key's peek. r.member is the lease's id, r.at its acquire time. Only
-- a settle at 0 comes here (lua/reservation.lua refuses any other:
-- core::kLeaseSettledAtACost).
-- The lease leaves first: the newest lease the trim then reads is the one the peek's
-- reset runs from, where trimming first read it twice when the lease leaving was the
-- newest (most releases: a key usually holds few leases). The clamp still counts the
-- lease that left, at r.at, as the trim before its removal would have.
SETTLE['cc'] = function(key, now, p, r, actual)
  local period = p.period
  if redis.call('ZREM', key, r.member) == 1 and r.at > now then now = r.at end
  local _, newest_time
  now, _, newest_time = trim_log(key, now, period)
  local count = cc_held(key, newest_time, now, period)
  return result(true, p.limit - count, 0, cc_reset(count, newest_time, now, period))
end

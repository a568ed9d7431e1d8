-- sliding_log: the exact sliding window as a sorted set of runs, as DecideSlidingLog decides.
--
-- The contract: docs/algorithms.md, "sliding_log (exact sliding window)", revision 2; the same
-- decisions as DecideSlidingLog in src/core/sliding_log.cc.
--
-- State: a sorted set with one member per admission (a run of units admitted together),
-- score = its time in µs, so memory and script time follow admissions, never units: a
-- cost of 100,000 is one member. A member is '<total>:<units>', where <total> counts the
-- units admitted to the key up to and including this run (zero-padded to a fixed width,
-- so members at one µs sort in admission order too) and is the member's unique id.
-- Rank order is then admission order, and:
--   units counted = total(newest) - total(oldest) + units(oldest)
--   the k-th oldest counted unit is in the first run whose total reaches
--   total(oldest) - units(oldest) + k, found by binary search over ranks.
-- A key never holds more than L runs (each run is at least one unit).
--
-- Blocks (block=D; docs/algorithms.md, "Blocks"): blocked_until is one more member of the
-- same set, 'block:<µs>' scored -inf, so it lives under the key's one Redis key (one
-- Cluster slot) and its TTL, and a log written before blocks reads as unblocked. Scored
-- -inf it sorts before every run: the trims drop runs from the exclusive bound '(-inf'
-- and keep it, the newest run stays at rank -1, and a rank read steps over it by
-- starting at rank 1 when rank 0 is the block's. A decision without a block pays nothing
-- for this: the oldest run it reads anyway shows whether the block's member is there. (A
-- second key would need a {hash tag} the store key does not have; a block kept in a run's
-- member would move with the runs; and one member of a fixed name scored -blocked_until
-- would need the trims to start at 0, which a take's run moved below 0 (lua/take.lua,
-- times within P of the epoch) would then outlive.)
--
-- An entry admitted at s counts at now iff s > now - P: an entry exactly P old no longer
-- counts, so every decision first drops the runs with score <= now - P (inclusive
-- bound), peeks and denials included. That trim is a write, but it is the state
-- src/core keeps (DecideSlidingLog drops through now - P on every call): once a decision
-- at a later now has dropped a run, a request whose time went backwards must not count it
-- again. With time moving forward the trim is invisible to every decision.

SORTED_SET['sl'] = true

-- Totals are exact in Lua's doubles below 2^53. A key admitted to without a break (never
-- empty for a whole period) could in principle count that far, at the largest rate a
-- policy allows (10^8 units/s) after ~100 days; before a total would pass SL_MAX_TOTAL
-- the run totals are renumbered from the oldest counted run, which changes no decision.
local SL_TOTAL_DIGITS = 16
local SL_MAX_TOTAL = 1000000000000000  -- 10^15 < 2^53, with room for one more run
local SL_ZADD_CHUNK = 1000  -- members per ZADD when renumbering (bounded by the Lua stack)

local function sl_member(total, units)
  return string.format('%0' .. SL_TOTAL_DIGITS .. 'd:%d', total, units)
end

-- total, units of a member; nil for the block's member, 'block:<µs>', when `block_ok` (a
-- rank-0 read).
local function sl_parse(member, block_ok)
  local total = tonumber(string.sub(member, 1, SL_TOTAL_DIGITS))
  local units = tonumber(string.sub(member, SL_TOTAL_DIGITS + 2))
  if total == nil or units == nil then
    if block_ok and string.sub(member, 1, 6) == 'block:' then return nil end
    corrupt()
  end
  return total, units
end

-- The total of the run at rank r.
local function sl_total_at(key, r)
  local m = redis.call('ZRANGE', key, int_string(r), int_string(r))
  return (sl_parse(m[1]))
end

-- Rewrites every run with totals counted from the oldest one (`before` units earlier).
-- The block's member, scored -inf, stays as it is.
local function sl_renumber(key, before)
  local all = redis.call('ZRANGEBYSCORE', key, '(-inf', '+inf', 'WITHSCORES')
  redis.call('ZREMRANGEBYSCORE', key, '(-inf', '+inf')
  local args = {}
  for i = 1, #all, 2 do
    local total, units = sl_parse(all[i])
    args[#args + 1] = all[i + 1]
    args[#args + 1] = sl_member(total - before, units)
    if #args >= 2 * SL_ZADD_CHUNK or i + 1 == #all then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
end

-- Admits a run of `cost` units at `now` after the newest run (total `newest_total`;
-- `before` units were admitted before the oldest counted run). The key lives `ttl` µs
-- (P when not given): P after the run, from the time the script was asked about.
local sl_appended_at  -- the time of the run sl_append added last (MARK['sl'] reads it)

local function sl_append(key, now, before, newest_total, cost, period, ttl)
  sl_appended_at = now
  if newest_total + cost > SL_MAX_TOTAL then
    sl_renumber(key, before)
    newest_total = newest_total - before
  end
  redis.call('ZADD', key, int_string(now), sl_member(newest_total + cost, cost))
  -- The newest counted run is now: reset = TTL = P (docs/algorithms.md: keys expire after P).
  expire(key, ttl or period)
end

-- The log as a decision at `now` sees it. Time going backwards is clamped to the newest
-- run (counted or not), unless `scheduled` (delay=: runs ahead of now are scheduled charges); the trim then drops what no longer counts, and deletes the key
-- when that is every run (and it holds no block). Returns now (clamped), the newest run's
-- time (nil, or -inf for the block's member: none), its total, the units admitted before
-- the oldest counted run, the units that still count, and the rank of the oldest run (1
-- behind the block's member, else 0). When none counts the trim deleted every run, and
-- totals start again from 0.
local function sl_counted(key, now, period, scheduled)
  local newest, newest_time
  now, newest, newest_time = trim_log(key, now, period, scheduled)
  if not (newest_time and newest_time > now - period) then
    return now, newest_time, 0, 0, 0, 0
  end
  local newest_total = sl_parse(newest[1])
  local first = 0
  local oldest_total, oldest_units = sl_parse(redis.call('ZRANGE', key, '0', '0')[1], true)
  if not oldest_total then  -- the block's member: the oldest run is next
    first = 1
    oldest_total, oldest_units = sl_parse(redis.call('ZRANGE', key, '1', '1')[1])
  end
  local before = oldest_total - oldest_units
  return now, newest_time, newest_total, before, newest_total - before, first
end

-- The time of the k-th oldest counted unit (`before` units were admitted before the oldest
-- counted run, at rank `first`). Its run is the first whose total reaches before + k, and
-- lies within the first k runs: found by binary search over ranks.
local function sl_unit_time(key, first, before, k)
  local lo = first
  local hi = first + min(redis.call('ZCARD', key) - first, k) - 1
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if sl_total_at(key, mid) >= before + k then hi = mid else lo = mid + 1 end
  end
  return tonumber(redis.call('ZRANGE', key, int_string(lo), int_string(lo), 'WITHSCORES')[2])
end

DECIDERS['sl'] = function(key, now, p, cost)
  local limit, period = p.limit, p.period
  -- A run admitted at the clamped time lives P from it (a take's run is stamped ahead:
  -- the key's TTL runs from the time asked, lua/take.lua).
  local asked = now
  local newest_time, newest_total, before, count, first
  now, newest_time, newest_total, before, count, first = sl_counted(key, now, period)
  local ttl = period + now - asked

  local allowed = cost == 0 or count + cost <= limit
  if allowed and cost > 0 then
    if deferring then
      defer_call(function() sl_append(key, now, before, newest_total, cost, period, ttl) end)
    else
      sl_append(key, now, before, newest_total, cost, period, ttl)
    end
    return result(true, limit - count - cost, 0, period)
  end

  local retry = 0
  if not allowed then
    if cost > limit then
      retry = -1  -- can never fit
    else
      -- Enough units must leave: the k-th oldest counted one, k = count + c - L
      -- (1 <= k <= count here), stops counting P after it was admitted. Its run is the
      -- first whose total reaches before + k, and lies within the first k runs (ranks
      -- from `first`, the oldest run's).
      retry = sl_unit_time(key, first, before, count + cost - limit) + period - now
    end
  end
  -- reset: P after the newest counted run, or 0 when none counts. When any counts, the
  -- newest run is counted (the trim only removed older ones), and the key's TTL, set when
  -- that run was admitted, still ends at the same instant.
  local reset = 0
  if count > 0 then reset = newest_time + period - now end
  return result(allowed, limit - count, retry, reset)
end

-- delay=D (docs/algorithms.md, "Waiting"; DelaySlidingLog in src/core/sliding_log.cc): only
-- runs at or before now - P leave (no clamp to the newest run: the scheduled runs ahead of now
-- keep every run that counts at their times). s is the earliest t >= max(now, newest) at
-- which the units in (t - P, t] plus the cost fit; the run is stored at s.
DELAYED['sl'] = function(key, now, p, cost, not_before, max_wait)
  local limit, period = p.limit, p.period
  redis.call('ZREMRANGEBYSCORE', key, '(-inf', int_string(now - period))
  local newest = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
  local newest_time = tonumber(newest[2])
  local units, before, newest_total, first, held = 0, 0, 0, 0, 0
  if newest_time and newest_time > now - period then  -- not the block's member alone
    newest_total = sl_parse(newest[1])
    local oldest_total, oldest_units = sl_parse(redis.call('ZRANGE', key, '0', '0')[1], true)
    if not oldest_total then  -- the block's member (a rule without delay= left it)
      first = 1
      oldest_total, oldest_units = sl_parse(redis.call('ZRANGE', key, '1', '1')[1])
    end
    before = oldest_total - oldest_units
    units = newest_total - before
    held = newest_time + period - now
  else
    newest_time = now
  end
  if cost == 0 or cost > limit then  -- a peek, or never: as without delay
    return delayed(cost == 0, limit - units, cost == 0 and 0 or -1, held)
  end
  -- A multi-decision's window, as DELAYED['gcra']: the count only falls after the newest run.
  max_wait = max_wait or p.delay
  local start = max(now, newest_time, not_before or now)
  if units + cost > limit then
    -- The k-th oldest unit (k = units + cost - L) must have aged out: its run is found as
    -- DECIDERS['sl'] finds it.
    start = max(start, sl_unit_time(key, first, before, units + cost - limit) + period)
  end
  local wait = start - now
  if wait > max_wait then return delayed(false, 0, wait - max_wait, held) end
  if deferring then
    defer_call(function() sl_append(key, start, before, newest_total, cost, period, wait + period) end)
  else
    sl_append(key, start, before, newest_total, cost, period, wait + period)
  end
  local remaining = 0
  if wait == 0 then remaining = limit - units - cost end
  return delayed(true, remaining, wait, wait + period)
end

-- BLOCK_LOG (common.lua FG.decide_blocked): with `until_`, starts a block until then,
-- raising the key's TTL to cover it (never lowering it: a run stamped ahead, a take's, may
-- hold it longer); without, reads blocked_until (0: none), removing an ended block's
-- member so that the decisions after it find the oldest run at rank 0 again.
-- One function, not a table of helpers: every call of the script makes it again, block or
-- not (callgrind'd redis-server: this one costs a single decision ~2,400 instructions of
-- ~200,000, a batched one ~40; the first version's five helpers cost ~9,700).
BLOCK_LOG['sl'] = function(key, now, until_)
  if until_ then
    redis.call('ZADD', key, '-inf', 'block:' .. int_string(until_))
    local px = ttl_ms(until_ - now)
    if redis.call('PTTL', key) < tonumber(px) then redis.call('PEXPIRE', key, px) end
    return
  end
  local member = redis.call('ZRANGEBYSCORE', key, '-inf', '-inf')[1]
  if not member then return 0 end
  until_ = tonumber(string.sub(member, 7))
  if until_ == nil then corrupt() end
  if until_ > now then return until_ end
  redis.call('ZREM', key, member)
  return 0
end

-- Reservations (docs/reservations.md): the mark is the time of the reservation's run,
-- which the decision just appended (a reserve's decision is never deferred).
MARK['sl'] = function(key, now, p)
  return sl_appended_at, sl_appended_at, 0
end

-- Replaces the run `member` (rank `rank`, score `score`; rank false when it is the
-- newest run) with one of units + delta, or removes it when that is 0, and moves the
-- totals of the runs after it by the difference.
local function sl_resize(key, member, rank, score, delta)
  local total, units = sl_parse(member)
  local later = {}
  if rank then later = redis.call('ZRANGE', key, int_string(rank + 1), '-1', 'WITHSCORES') end
  redis.call('ZREM', key, member)
  if units + delta > 0 then redis.call('ZADD', key, score, sl_member(total + delta, units + delta)) end
  for i = 1, #later, 2 do
    local t, u = sl_parse(later[i])
    redis.call('ZREM', key, later[i])
    redis.call('ZADD', key, later[i + 1], sl_member(t + delta, u))
  end
end

-- The run of `units` units at `at_score` (runs of one size at one µs are
-- interchangeable: the newest such one), or nil when none is there any more.
local function sl_run_at(key, at_score, units)
  local same = redis.call('ZRANGEBYSCORE', key, at_score, at_score)
  for i = #same, 1, -1 do
    if select(2, sl_parse(same[i])) == units then return same[i] end
  end
  return nil
end

-- Releases (docs/multi.md): the run of `cost` units admitted at `at` leaves, and the
-- runs after it are renumbered (their totals counted it), as if it had never been
-- admitted.
RELEASE['sl'] = function(key, now, p, cost, at)
  local at_score = int_string(at)
  local run = sl_run_at(key, at_score, cost)
  if not run then return end  -- already past the window: trimmed
  sl_resize(key, run, redis.call('ZRANK', key, run), at_score, -cost)
end

SETTLE['sl'] = function(key, now, p, r, actual)
  local period = p.period
  local newest, newest_time
  now, newest, newest_time = trim_log(key, now, period)
  -- The trim leaves the newest run unless none counts any more.
  local counted = newest_time and newest_time > now - period
  local delta = actual - r.estimate
  if delta ~= 0 then
    -- The reservation's run: one at its time with its estimate (runs of one size at one
    -- µs are interchangeable, as for RELEASE: the newest such one goes). Most often it
    -- is the newest run of all, which needs no search and has no runs after it.
    local at_score = int_string(r.mark)
    local run, rank
    if counted and newest_time == r.mark and select(2, sl_parse(newest[1])) == r.estimate then
      run = newest[1]
    else
      run = sl_run_at(key, at_score, r.estimate)
      if run then rank = redis.call('ZRANK', key, run) end
    end
    if run then
      sl_resize(key, run, rank, at_score, max(delta, -r.estimate))
    elseif delta > 0 then
      -- The run has left the window: the newest run takes the overcharge, or a new run
      -- at now when none counts.
      if counted then
        sl_resize(key, newest[1], false, newest[2], delta)
      else  -- the key's TTL still covers its block, if it has one (the set holds only that)
        sl_append(key, now, 0, 0, delta, period, max(period, BLOCK_LOG['sl'](key, now) - now))
      end
    end
  end
  return DECIDERS['sl'](key, now, p, 0)
end


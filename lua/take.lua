-- take(k, δ): the largest lease of up to k units, per algorithm, the same steps as src/core/take.h.
--
-- The contract: docs/algorithms.md, "Take up to k", with the rules docs/prefetch.md proves: a
-- lease is checked as if spent at now and charged as if spent at now + δ. Assembled after every
-- algorithm file and before lua/reservation.lua, whose 't' operation calls it:
--   TAKE[kind] = function(key, now, p, up_to, lifetime) -> units, ends, allowed, remaining,
--     retry_after_us, reset_after_us
-- units = 0: nothing was written; the answer is a cost-1 decision's when it denies, else the
-- peek (decide per request). units > 0: the algorithm's own decision of cost `units` on the
-- leased state (the window algorithms' and the buckets' deciders read it through `known`, as
-- if stored), its write made, and `ends` the lease's end (µs).
local TAKE = {}

-- A decision made and its writes dropped (the multi-decision machinery of common.lua).
local function take_dry(key, now, p, cost)
  deferring = true
  local allowed, remaining, retry, reset = p.decide(key, now, p, cost)
  deferring, deferred_n = false, 0
  return allowed, remaining, retry, reset
end

local function no_lease(key, now, p)
  local allowed, remaining, retry, reset = take_dry(key, now, p, 1)
  if allowed == 1 then return 0, 0, take_dry(key, now, p, 0) end
  return 0, 0, allowed, remaining, retry, reset
end

-- The decision of cost min(up_to, room) on `leased` (a packed state, or an integer string),
-- or no lease when that is 0.
local function lease_of(key, now, p, leased, room, up_to, ends)
  local units = min(up_to, room)
  if units < 1 then return no_lease(key, now, p) end
  known[key] = leased
  return units, ends, p.decide(key, now, p, units)
end

TAKE['gcra'] = function(key, now, p, up_to, lifetime)
  local emission, tau = p.emission, p.tau
  if tau - lifetime < emission then return no_lease(key, now, p) end
  local tat = now + select(4, p.decide(key, now, p, 0))  -- the peek's reset is tat - now
  local base = max(tat, now + lifetime)
  local room = floor(max(0, now + tau - base) / emission)
  return lease_of(key, now, p, int_string(base), room, up_to, now + lifetime)
end

TAKE['tb'] = function(key, now, p, up_to, lifetime)
  local cap = p.burst - ceil(p.limit * lifetime / p.period)
  if cap < 1 then return no_lease(key, now, p) end
  local t0, last, at = tb_load(key, p.burst, now)
  local level = min(cap, tb_level(p.burst, p.limit, p.period, t0, last, at, 0))
  return lease_of(key, now, p, struct.pack('<dd', level, at), floor(level), up_to,
                  now + lifetime)
end

TAKE['tbi'] = function(key, now, p, up_to, lifetime)
  local tokens, last, at = tbi_load(key, p, now)
  -- Refill instants last + i·P in (at, at + δ]: at - last < P after tbi_load.
  local cap = p.burst - floor((at + lifetime - last) / p.period) * p.limit
  if cap < 1 then return no_lease(key, now, p) end
  tokens = min(cap, tokens)
  return lease_of(key, now, p, struct.pack('<dd', tokens, last), floor(tokens), up_to,
                  now + lifetime)
end

TAKE['fw'] = function(key, now, p, up_to, lifetime)
  local raw = get(key)
  local stored_w, count = nil, 0
  if raw then stored_w, count = unpack_state('<dI4', raw, 12) end
  local _, w = window_of(now, p.period, stored_w)
  if stored_w ~= w then count = 0 end
  local leased = raw or struct.pack('<dI4', w, 0)
  return lease_of(key, now, p, leased, p.limit - count, up_to,
                  min(now + lifetime, (w + 1) * p.period))
end

TAKE['sw'] = function(key, now, p, up_to, lifetime)
  local period, limit = p.period, p.limit
  local at, w, cur, prev = sw_load(key, now, p)
  local estimate = prev * (period - (at - w * period)) / period + cur
  local room = floor(limit - estimate)
  if room > 0 and estimate + room > limit then room = room - 1 end  -- the subtraction rounded up
  local leased = get(key) or struct.pack('<dI4I4', w, 0, 0)
  return lease_of(key, now, p, leased, room, up_to, min(now + lifetime, (w + 1) * period))
end

-- The run is stamped at the lease's end; the runs a decision clamped to that stamp would
-- trim too early (score <= stamp - P) become one run at stamp - P + 1 (a prefix of the log,
-- so the running totals stay right; from '(-inf', which keeps a block's member, scored
-- -inf). TTL: P after the stamp, from the caller's now.
TAKE['sl'] = function(key, now, p, up_to, lifetime)
  local limit, period = p.limit, p.period
  local at, newest_time, newest_total, before, count = sl_counted(key, now, period)
  local units = min(up_to, limit - count)
  if units < 1 then return no_lease(key, now, p) end
  local stamp = at + lifetime
  if newest_time and newest_time > stamp then stamp = newest_time end
  local old = redis.call('ZRANGEBYSCORE', key, '(-inf', int_string(stamp - period))
  if #old > 0 then
    local first_total, first_units = sl_parse(old[1])
    local last_total = sl_parse(old[#old])
    redis.call('ZREMRANGEBYSCORE', key, '(-inf', int_string(stamp - period))
    redis.call('ZADD', key, int_string(stamp - period + 1),
               sl_member(last_total, last_total - first_total + first_units))
  end
  sl_append(key, stamp, before, newest_total, units, period, stamp + period - now)
  return units, now + lifetime, 1, limit - count - units, 0, stamp + period - at
end

-- token_bucket, both refill modes: the same steps as src/core/token_bucket.h.
--
-- The contract: docs/algorithms.md, "token_bucket"; double operation for double operation as the
-- C++. Capacity C = burst; missing state = a full bucket (tokens = C, last = now). Time going
-- backwards is clamped: now = max(now, last), so no refill is counted twice and waits are never
-- negative.

-- refill: smooth. level(d): the level after waiting d more µs with no traffic, from the
-- state (t0, last) at the (clamped) decision time now.
local function tb_level(cap, limit, period, t0, last, now, d)
  return min(cap, t0 + max(0, now + d - last) * limit / period)
end

-- wait(x): the smallest whole d >= 0 with level(d) >= x. The closed form may be off by
-- one from double rounding, so step it down, then up (docs/algorithms.md: "step d down while
-- level(d - 1) >= x and up while level(d) < x").
local function tb_wait(cap, limit, period, t0, last, now, x)
  local d = max(0, ceil((x - t0) * period / limit - (now - last)))
  while d > 0 and tb_level(cap, limit, period, t0, last, now, d - 1) >= x do d = d - 1 end
  while tb_level(cap, limit, period, t0, last, now, d) < x do d = d + 1 end
  return d
end

-- Both modes store struct '<dd' (level, last), the level bit-exact (fractional when
-- smooth, whole when interval); a missing key is a full bucket. Time going backwards is
-- clamped to `last`. Returns level, last, now, and the stored string (false: none).
local function tb_load(key, cap, now)
  local level, last = cap, now
  local raw = get(key)
  -- 8 bytes: a block alone, the bucket fresh (a policy without block= on a blocked key).
  if raw and #raw ~= 8 then level, last = unpack_state('<dd', raw, 16) end
  if last > now then now = last end
  return level, last, now, raw
end

DECIDERS['tb'] = function(key, now, p, cost)
  local limit, period, burst = p.limit, p.period, p.burst
  local cap = burst
  local t0, last, at, raw = tb_load(key, cap, now)
  if raw and #raw ~= 16 then  -- a block after the state: as in DECIDERS['gcra']
    return beside_block(key, now, 'tb', DECIDERS['tb'], key, now, p, cost)
  end
  now = at
  local tokens = tb_level(cap, limit, period, t0, last, now, 0)

  if cost == 0 or tokens >= cost then  -- a peek allows even a bucket an overcharge emptied
    -- A peek (cost 0) keeps the state as it is and writes nothing.
    if cost > 0 then t0, last = tokens - cost, now end
    -- reset_after_us = wait(C) on the state after this decision; also the TTL (>= 1
    -- when cost > 0, since the level is then below C).
    local reset = tb_wait(cap, limit, period, t0, last, now, cap)
    if cost > 0 then save(key, struct.pack('<dd', t0, last), reset) end
    return result(true, floor(tokens - cost), 0, reset)
  end
  -- Denied: no write (the smooth level needs no write-back). c > C never fits.
  local retry = -1
  if cost <= cap then retry = tb_wait(cap, limit, period, t0, last, now, cost) end
  return result(false, floor(tokens), retry,
                   tb_wait(cap, limit, period, t0, last, now, cap))
end

-- refill: interval. The time until the bucket holds x tokens: whole refills of L
-- tokens, each P after the last one.
local function tbi_wait(limit, period, tokens, last, now, x)
  return last + ceil((x - tokens) / limit) * period - now
end

-- The interval bucket (tokens, last) at `now` >= last, every refill due by then applied (as
-- core::RefillInterval). A full bucket has no refill phase, so an expired key loses nothing.
local function tbi_refill(p, tokens, last, now)
  local refills = floor((now - last) / p.period)
  if refills > 0 then
    tokens = min(p.burst, tokens + refills * p.limit)
    last = last + refills * p.period
  end
  if tokens >= p.burst then last = now end
  return tokens, last
end

-- The interval bucket as it stands at `now`: returns tokens, last, now (clamped), and the
-- stored string (false: none).
local function tbi_load(key, p, now)
  local tokens, last, found
  tokens, last, now, found = tb_load(key, p.burst, now)
  tokens, last = tbi_refill(p, tokens, last, now)
  return tokens, last, now, found
end

DECIDERS['tbi'] = function(key, now, p, cost)
  local limit, period, cap = p.limit, p.period, p.burst
  local tokens, last, at, found = tbi_load(key, p, now)
  if found and #found ~= 16 then  -- a block after the state: as in DECIDERS['gcra']
    return beside_block(key, now, 'tbi', DECIDERS['tbi'], key, now, p, cost)
  end
  now = at

  local allowed = cost == 0 or tokens >= cost
  if allowed then tokens = tokens - cost end
  local retry = 0
  if not allowed then
    if cost > cap then retry = -1 else retry = tbi_wait(limit, period, tokens, last, now, cost) end
  end
  local reset = 0
  if tokens < cap then reset = tbi_wait(limit, period, tokens, last, now, cap) end

  -- The spec's pseudo-code stores (tokens, last) on every decision, denials included:
  -- writing back a refill already due changes no later decision. Like
  -- DecideIntervalBucket, a peek or denial on a missing key skips it (nothing to save);
  -- with a reset of 0 the state is fresh and save deletes the key.
  if (cost > 0 or found) then save(key, struct.pack('<dd', tokens, last), reset) end
  return result(allowed, floor(tokens), retry, reset)
end

-- delay=D (docs/algorithms.md, "Waiting"; src/core/delay.h): the bucket read at
-- from = max(now, last) (a last ahead of now is a scheduled charge); s is the earliest time
-- it holds `cost` tokens; an admission within D stores the bucket at s minus the cost.
DELAYED['tb'] = function(key, now, p, cost, not_before, max_wait)
  local limit, period, cap = p.limit, p.period, p.burst
  local t0, last, from, raw = tb_load(key, cap, now)
  if raw and #raw ~= 16 then  -- a block a rule without delay= left: as in DECIDERS['gcra']
    return beside_block(key, now, 'tb', DELAYED['tb'], key, now, p, cost, not_before, max_wait)
  end
  local ahead = from - now
  local full = ahead + tb_wait(cap, limit, period, t0, last, from, cap)
  if cost == 0 or cost > cap then  -- a peek, or never: as without delay
    local remaining = 0
    if last <= now then remaining = floor(tb_level(cap, limit, period, t0, last, from, 0)) end
    return delayed(cost == 0, remaining, cost == 0 and 0 or -1, full)
  end
  -- A multi-decision's window (as DELAYED['gcra']): the level only grows after s.
  max_wait = max_wait or p.delay
  local wait = max(ahead + tb_wait(cap, limit, period, t0, last, from, cost),
                   (not_before or now) - now)
  if wait > max_wait then return delayed(false, 0, wait - max_wait, full) end
  local start = now + wait
  local tokens = tb_level(cap, limit, period, t0, last, from, wait - ahead) - cost
  local reset = wait + tb_wait(cap, limit, period, tokens, start, start, cap)
  save(key, struct.pack('<dd', tokens, start), reset)
  local remaining = 0
  if wait == 0 then remaining = floor(tokens) end
  return delayed(true, remaining, wait, reset)
end

DELAYED['tbi'] = function(key, now, p, cost, not_before, max_wait)
  local limit, period, cap = p.limit, p.period, p.burst
  local tokens, last, from, found = tbi_load(key, p, now)
  if found and #found ~= 16 then  -- a block a rule without delay= left: as in DECIDERS['gcra']
    return beside_block(key, now, 'tbi', DELAYED['tbi'], key, now, p, cost, not_before, max_wait)
  end
  local full = 0
  if tokens < cap then full = tbi_wait(limit, period, tokens, last, now, cap) end
  if cost == 0 or cost > cap then  -- a peek, or never: as without delay
    local remaining = floor(tokens)
    if from > now then remaining = 0 end  -- the tokens belong to a scheduled charge
    return delayed(cost == 0, remaining, cost == 0 and 0 or -1, full)
  end
  local wait = from - now
  if tokens < cost then wait = tbi_wait(limit, period, tokens, last, now, cost) end
  max_wait = max_wait or p.delay  -- a multi-decision's window, as DELAYED['gcra']
  wait = max(wait, (not_before or now) - now)
  if wait > max_wait then return delayed(false, 0, wait - max_wait, full) end
  -- The refills due by s, then the charge.
  local start = now + wait
  tokens, last = tbi_refill(p, tokens, last, start)
  tokens = tokens - cost
  local reset = 0
  if tokens < cap then reset = tbi_wait(limit, period, tokens, last, now, cap) end
  save(key, struct.pack('<dd', tokens, last), reset)
  local remaining = 0
  if wait == 0 then remaining = floor(tokens) end
  return delayed(true, remaining, wait, reset)
end

-- Releases (docs/multi.md): `cost` tokens come back, capped at the capacity, as if they
-- had never been taken; a full bucket is fresh, so its key goes.
RELEASE['tb'] = function(key, now, p, cost, at)
  local cap, limit, period = p.burst, p.limit, p.period
  local t0, last
  t0, last, now = tb_load(key, cap, now)
  t0 = min(cap, tb_level(cap, limit, period, t0, last, now, 0) + cost)
  save(key, struct.pack('<dd', t0, now), tb_wait(cap, limit, period, t0, now, now, cap))
end

RELEASE['tbi'] = function(key, now, p, cost, at)
  local cap, limit, period = p.burst, p.limit, p.period
  local tokens, last
  tokens, last, now = tbi_load(key, p, now)
  tokens = min(cap, tokens + cost)
  if tokens >= cap then last = now end
  local reset = 0
  if tokens < cap then reset = tbi_wait(limit, period, tokens, last, now, cap) end
  save(key, struct.pack('<dd', tokens, last), reset)
end

-- Reservations (docs/reservations.md). The mark is the deficit (C - level) the
-- reservation left, with its time (smooth) or the refill phase (interval).
MARK['tb'] = function(key, now, p)
  local t0, last = unpack_state('<dd', get(key), 16)
  return last, 0, p.burst - t0
end

MARK['tbi'] = function(key, now, p)
  local tokens, last = unpack_state('<dd', get(key), 16)
  return now, last, p.burst - tokens
end

-- The tokens a bucket gets back (core::BucketRefund), and the lowest level an overcharge
-- may leave (core::BucketFloor).
local function tb_refund(r, actual, refilled)
  return min(r.estimate - actual, max(0, r.deficit - refilled))
end
local function tb_floor(p)
  return -(p.limit * FG.MAX_SETTLE_WAIT / p.period)
end

-- Both refill modes settle alike (core::BucketSettleWrites, core::SettledLevel): nothing
-- is written when actual = estimate, nor for a refund to a key already gone; otherwise
-- the level moves by the refund, capped at C, or by the overcharge, down to `lowest`.
-- load(now) returns the bucket at the settle time: tokens, last, now (clamped), and the
-- tokens refilled since the reservation.
local function tb_settle(key, now, p, r, actual, lowest, load)
  local value
  if actual ~= r.estimate and (get(key) or actual > r.estimate) then
    local tokens, last, refilled
    tokens, last, now, refilled = load(now)
    if actual < r.estimate then
      tokens = min(p.burst, tokens + tb_refund(r, actual, refilled))
    else
      tokens = max(lowest, tokens - (actual - r.estimate))
    end
    value = struct.pack('<dd', tokens, last)
  end
  return settle_value(key, now, p, value)
end

-- A lease's return refunds only while the bucket is as its take left it (`phase`: its
-- `last` then; src/core/settle.h): otherwise it settles at what it took.
local function tb_lease_actual(key, p, r, actual, phase)
  if not r.lease or actual >= r.estimate then return actual end
  local raw = get(key)
  if raw then
    local level, last = unpack_state('<dd', raw, 16)
    if last == phase and p.burst - level == r.deficit then return actual end
  end
  return r.estimate
end

SETTLE['tb'] = function(key, now, p, r, actual)
  local cap, limit, period = p.burst, p.limit, p.period
  actual = tb_lease_actual(key, p, r, actual, r.at)
  return tb_settle(key, now, p, r, actual, tb_floor(p), function(t)
    local t0, last
    t0, last, t = tb_load(key, cap, t)
    return tb_level(cap, limit, period, t0, last, t, 0), t, t, (t - r.at) * limit / period
  end)
end

SETTLE['tbi'] = function(key, now, p, r, actual)
  actual = tb_lease_actual(key, p, r, actual, r.mark)
  return tb_settle(key, now, p, r, actual, floor(tb_floor(p)), function(t)
    local tokens, last
    tokens, last, t = tbi_load(key, p, t)
    return tokens, last, t, floor((t - r.mark) / p.period) * p.limit
  end)
end


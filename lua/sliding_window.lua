-- sliding_window: two counters, the same steps as DecideSlidingWindow (src/core/windows.h).
-- The contract: docs/algorithms.md, "sliding_window (two-counter approximation, O(1) memory)".
-- State: struct '<dI4I4' (w, cur, prev), 16 bytes; both counts <= L <= 10^9.

-- When the state (w, cur, prev) would be the fresh one again, from time t: once window w
-- has stopped counting (it counts as the previous window through w + 1), or, with only
-- prev left, once window w - 1 has; 0 when nothing counts.
-- window_end, next_end: end(w) and end(w + 1), as (w + 1) * P and (w + 2) * P without tz.
local function sw_reset(cur, prev, window_end, next_end, t)
  if cur > 0 then return next_end - t end
  if prev > 0 then return window_end - t end
  return 0
end

-- The counts at `now` (as core::WindowSpanAt and core::CountsAt): returns at (the
-- clamped time), w (its window), cur (window w) and prev (window w-1), then start(w),
-- end(w) and end(w + 1) (w * P, (w + 1) * P and (w + 2) * P without tz), and the stored
-- string (false: none). A stored state one window old shifts down; an older one counts
-- nothing.
local function sw_load(key, now, p)
  local raw = get(key)
  local stored_w, stored_cur, stored_prev
  -- 8 bytes: a block alone, the window fresh (a policy without block= on a blocked key).
  if raw and #raw ~= 8 then
    stored_w, stored_cur, stored_prev = unpack_state('<dI4I4', raw, 16)
  end
  local at, w, start, window_end, next_end
  if p.cal then
    at, w, start, window_end, next_end = calendar_window(now, p.cal, stored_w)
  else
    local period = p.period
    at, w = window_of(now, period, stored_w)
    start, window_end, next_end = w * period, (w + 1) * period, (w + 2) * period
  end
  local cur, prev = 0, 0
  if stored_w == w then
    cur, prev = stored_cur, stored_prev
  elseif stored_w == w - 1 then
    prev = stored_cur
  end
  return at, w, cur, prev, start, window_end, next_end, raw
end

DECIDERS['sw'] = function(key, now, p, cost)
  local limit = p.limit
  local at, w, cur, prev, start, window_end, next_end, raw = sw_load(key, now, p)
  if raw and #raw ~= 16 then  -- a block after the state: as in DECIDERS['gcra']
    return beside_block(key, now, 'sw', DECIDERS['sw'], key, now, p, cost)
  end
  -- P_w and x: with tz a window is 23 to 25 hours, 28 to 31 days... (P without tz).
  local period = window_end - start
  local x = at - start

  local estimate = prev * (period - x) / period + cur
  local allowed = cost == 0 or estimate + cost <= limit
  local retry = 0
  if allowed then
    if cost > 0 then
      cur = cur + cost
      estimate = estimate + cost
    end
  elseif cost > limit then
    retry = -1  -- can never fit
  else
    -- The earliest t with no other traffic at which estimate(t) + c <= L: within this
    -- window while prev decays, else in the next one while cur (now prev) decays.
    -- (Here cur > 0 in the second branch: with cur = prev = 0 the request fits.)
    local t
    if cur <= limit - cost and prev > 0 then
      t = start + ceil(period - (limit - cost - cur) * period / prev)
    else
      local next_period = next_end - window_end  -- P_n
      t = window_end + max(0, ceil(next_period - (limit - cost) * next_period / cur))
    end
    retry = t - at
  end

  local reset = sw_reset(cur, prev, window_end, next_end, at)
  -- A denial or a peek writes nothing.
  if allowed and cost > 0 then
    save(key, struct.pack('<dI4I4', w, cur, prev), reset)
  end
  return result(allowed, floor(limit - estimate), retry, reset)
end

-- Releases (docs/multi.md): the units leave the count of the window they were admitted
-- in (the one holding `at`): `cur` while it is the current window, `prev` once it is the
-- previous one; older than that, they no longer count anyway.
RELEASE['sw'] = function(key, now, p, cost, at)
  local period = p.period
  local raw = get(key)
  if not raw then return end
  local w, cur, prev = unpack_state('<dI4I4', raw, 16)
  local admitted
  if p.cal then
    admitted = calendar_window_of(at, p.cal)
    if admitted == nil then return end  -- older than anything still counted
  else
    admitted = floor(at / period)
  end
  if w == admitted then
    cur = max(0, cur - cost)
  elseif w == admitted + 1 then
    prev = max(0, prev - cost)
  else
    return
  end
  local window_end, next_end
  if p.cal then
    -- w's bounds among the caller's; past them (a release long after), a TTL of the
    -- longest two windows (a later TTL never changes a decision).
    local i = w - p.cal.first + 2
    window_end = p.cal[i] or now + FG.MAX_PERIOD
    next_end = p.cal[i + 1] or window_end + FG.MAX_PERIOD
  else
    window_end, next_end = (w + 1) * period, (w + 2) * period
  end
  save(key, struct.pack('<dI4I4', w, cur, prev), sw_reset(cur, prev, window_end, next_end, now))
end

-- Reservations (docs/reservations.md): the mark is the window the reservation was
-- counted in, which takes the difference while it still counts (as cur or as prev); an
-- overcharge for a window no longer counted goes to the current one.
MARK['sw'] = function(key, now, p)
  return now, (unpack_state('<dI4I4', get(key), 16)), 0
end

SETTLE['sw'] = function(key, now, p, r, actual)
  local at, w, cur0, prev0 = sw_load(key, now, p)
  local cur, prev = cur0, prev0
  local delta = actual - r.estimate
  if r.mark == w - 1 then
    prev = settled_count(p, prev, delta)
  elseif r.mark == w or delta > 0 then
    cur = settled_count(p, cur, delta)
  end
  local value
  if cur ~= cur0 or prev ~= prev0 then value = struct.pack('<dI4I4', w, cur, prev) end
  return settle_value(key, at, p, value)
end


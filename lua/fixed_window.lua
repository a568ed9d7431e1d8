-- fixed_window: one counter per window, as DecideFixedWindow in src/core/windows.h.
-- The contract: docs/algorithms.md, "fixed_window".
-- State: struct '<dI4' (w, count), 12 bytes; count <= L <= 10^9 fits 32 bits.
DECIDERS['fw'] = function(key, now, p, cost)
  local limit, period = p.limit, p.period
  local raw = get(key)
  local stored_w, stored_count
  if raw then
    if #raw ~= 12 then  -- a block after the state: as in DECIDERS['gcra']
      return beside_block(key, now, 'fw', DECIDERS['fw'], key, now, p, cost)
    end
    stored_w, stored_count = unpack_state('<dI4', raw, 12)
  end
  local at, w, to_end
  if p.cal then  -- calendar windows (tz=ZONE): end(w) is the next local midnight
    local start, window_end
    at, w, start, window_end = calendar_window(now, p.cal, stored_w)
    to_end = window_end - at
  else
    at, w = window_of(now, period, stored_w)
    to_end = (w + 1) * period - at
  end
  local count = 0
  if stored_w == w then count = stored_count end

  local allowed = cost == 0 or count + cost <= limit
  if allowed and cost > 0 then count = count + cost end
  -- c > L can never fit (-1); otherwise the next window admits it.
  local retry = to_end
  if cost > limit then retry = -1 end
  local reset = 0
  if count > 0 then reset = to_end end
  -- A denial or a peek writes nothing.
  if allowed and cost > 0 then save(key, struct.pack('<dI4', w, count), reset) end
  return result(allowed, limit - count, retry, reset)
end

-- Releases (docs/multi.md): the count goes down by `cost` if the window the units were
-- admitted in (the one holding `at`) is still the one counted; a later window never
-- counted them.
RELEASE['fw'] = function(key, now, p, cost, at)
  local period = p.period
  local raw = get(key)
  if not raw then return end
  local w, count = unpack_state('<dI4', raw, 12)
  local admitted, window_end
  if p.cal then
    admitted, window_end = calendar_window_of(at, p.cal)
  else
    admitted = floor(at / period)
    window_end = (admitted + 1) * period
  end
  if w ~= admitted then return end
  count = max(0, count - cost)
  local reset = 0
  if count > 0 then reset = window_end - now end
  save(key, struct.pack('<dI4', w, count), reset)
end

-- Reservations (docs/reservations.md): the mark is the window the reservation was
-- counted in. A refund only while it is still the window counted; an overcharge goes to
-- the window counted now.
MARK['fw'] = function(key, now, p)
  return now, (unpack_state('<dI4', get(key), 12)), 0
end

SETTLE['fw'] = function(key, now, p, r, actual)
  local raw = get(key)
  local stored_w, stored_count
  if raw then stored_w, stored_count = unpack_state('<dI4', raw, 12) end
  local at, w = window_of(now, p.period, stored_w)
  local count = 0
  if stored_w == w then count = stored_count end
  local delta = actual - r.estimate
  if delta < 0 and r.mark ~= w then delta = 0 end
  local value
  if delta ~= 0 and (count > 0 or delta > 0) then
    value = struct.pack('<dI4', w, settled_count(p, count, delta))
  end
  return settle_value(key, at, p, value)
end


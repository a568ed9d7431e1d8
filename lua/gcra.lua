-- gcra: algorithms.md, "gcra (Generic Cell Rate Algorithm; the default)";
-- the same steps as src/core/gcra.cc, double operation for double operation.
-- State: the tat as a decimal integer string, so Redis keeps it int-encoded; missing
-- state = now. Time going backwards needs no clamp: tat = max(stored, now) already.
DECIDERS['gcra'] = function(key, now, limit, period, burst, cost)
  local emission = period / limit
  local tau = burst * emission
  local tat = now
  local raw = redis.call('GET', key)
  if raw then
    local stored = tonumber(raw)
    if stored == nil then FG.corrupt() end
    if stored > now then tat = stored end
  end
  local new = tat + cost * emission
  local diff = now - (new - tau)

  if cost == 0 then
    -- Peek: diff is now - (tat - tau), which may be a hair below 0 from rounding, so
    -- it is always allowed and reports the state as it stands; no write.
    return FG.result(true, math.floor(math.max(0, diff) / emission), 0, tat - now)
  end
  if diff >= 0 then
    local new_tat = math.ceil(new)
    -- TTL ceil(new) - now >= 1 here (cost > 0), so this is always a SET.
    FG.save(key, FG.int_string(new_tat), new_tat - now)
    return FG.result(true, math.floor(diff / emission), 0, new_tat - now)
  end
  -- Denied: no write. c * E > tau can never fit, even from a fresh state.
  local retry = -1
  if not (cost * emission > tau) then retry = math.ceil(-diff) end
  return FG.result(false, math.floor(math.max(0, now - (tat - tau)) / emission), retry, tat - now)
end

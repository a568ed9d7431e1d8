-- gcra: algorithms.md, "gcra (Generic Cell Rate Algorithm; the default)", revision 2;
-- the same steps as src/core/gcra.cc.
-- Every quantity is a whole number of µs below 2^53, so Lua's doubles hold them exactly
-- and sums, differences and products of them are exact too. The two divisions are
-- floor(a / b) of such integers: the true quotient is never closer than 1/b to the next
-- integer, which at these magnitudes (a / b <= 3.2e13) is far more than the division's
-- rounding error, so math.floor gives the integer quotient, as C++'s `/` does.
-- State: the tat as a decimal integer string, so Redis keeps it int-encoded (the memory
-- of a plain SET); missing state = now. Time going backwards needs no clamp:
-- tat = max(stored, now) already.
DECIDERS['gcra'] = function(key, now, limit, period, burst, cost)
  local emission = math.floor((period + limit - 1) / limit)  -- E = ceil(P / L)
  local tau = burst * emission
  local tat = now
  local raw = redis.call('GET', key)
  if raw then
    local stored = tonumber(raw)
    if stored == nil then FG.corrupt() end
    if stored > now then tat = stored end
  end
  -- What the key could admit now, before this request.
  local room = math.max(0, now + tau - tat)

  if cost == 0 then  -- peek
    return FG.result(true, math.floor(room / emission), 0, tat - now)
  end
  if cost > burst then  -- can never fit
    return FG.result(false, math.floor(room / emission), -1, tat - now)
  end
  local new = tat + cost * emission
  local diff = now + tau - new
  if diff >= 0 then
    -- TTL new - now >= E >= 1 here (cost > 0), so this is always a SET.
    FG.save(key, FG.int_string(new), new - now)
    return FG.result(true, math.floor(diff / emission), 0, new - now)
  end
  return FG.result(false, math.floor(room / emission), -diff, tat - now)
end

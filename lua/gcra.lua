-- gcra: algorithms.md, "gcra (Generic Cell Rate Algorithm; the default)", revision 2;
-- the same steps as src/core/gcra.h.
-- Every quantity is a whole number of µs below 2^53, so Lua's doubles hold them exactly
-- and sums, differences and products of them are exact too. The two divisions are
-- floor(a / b) of such integers: the true quotient is never closer than 1/b to the next
-- integer, which at these magnitudes (a / b <= 3.2e13) is far more than the division's
-- rounding error, so floor gives the integer quotient, as C++'s `/` does.
-- State: the tat as a decimal integer string, so Redis keeps it int-encoded (the memory
-- of a plain SET); missing state = now. Time going backwards needs no clamp:
-- tat = max(stored, now) already.

-- E = ceil(P / L) and tau = B * E, once per policy.
PREPARE['gcra'] = function(p)
  p.emission = floor((p.period + p.limit - 1) / p.limit)
  p.tau = p.burst * p.emission
end

DECIDERS['gcra'] = function(key, now, p, cost)
  local emission, tau = p.emission, p.tau
  local tat = now
  local raw = redis.call('GET', key)
  if raw then
    local stored = tonumber(raw)
    if stored == nil then corrupt() end
    if stored > now then tat = stored end
  end
  -- What the key could admit now, before this request.
  local room = max(0, now + tau - tat)

  if cost == 0 then  -- peek
    return result(true, floor(room / emission), 0, tat - now)
  end
  if cost > p.burst then  -- can never fit
    return result(false, floor(room / emission), -1, tat - now)
  end
  local new = tat + cost * emission
  local diff = now + tau - new
  if diff >= 0 then
    -- TTL new - now >= E >= 1 here (cost > 0), so this is always a SET.
    redis.call('SET', key, int_string(new), 'PX', ttl_ms(new - now))
    return 1, floor(diff / emission), 0, new - now
  end
  return result(false, floor(room / emission), -diff, tat - now)
end

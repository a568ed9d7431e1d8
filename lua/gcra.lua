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
  local raw = get(key)
  if raw then
    local stored = tonumber(raw)
    if stored == nil then corrupt() end
    if stored > now then tat = stored end
  end
  -- What the key could admit now, before this request.
  local room = now + tau - tat
  if room < 0 then room = 0 end

  if cost == 0 then  -- peek
    return result(true, floor(room / emission), 0, tat - now)
  end
  if cost > p.burst then  -- can never fit
    return result(false, floor(room / emission), -1, tat - now)
  end
  local new = tat + cost * emission
  local diff = now + tau - new
  if diff >= 0 then
    -- TTL new - now >= E >= 1 here (cost > 0), so this is always a SET (save, written out:
    -- most decisions come this way).
    local value = format('%d', new)
    if deferring then
      defer(key, value, ttl_ms(new - now))
    else
      redis.call('SET', key, value, 'PX', ttl_ms(new - now))
      known[key] = value
    end
    return 1, floor(diff / emission), 0, new - now
  end
  return result(false, floor(room / emission), -diff, tat - now)
end

-- Gives back `cost` admitted earlier (a released reservation, docs/multi.md): tat moves
-- back by cost * E, as if those units had never been admitted.
RELEASE['gcra'] = function(key, now, p, cost, at)
  local raw = get(key)
  if not raw then return end
  local tat = tonumber(raw)
  if tat == nil then corrupt() end
  save(key, int_string(tat - cost * p.emission), tat - cost * p.emission - now)
end

-- gcra: the Generic Cell Rate Algorithm in whole µs, the same steps as src/core/gcra.h.
-- The contract: docs/algorithms.md, "gcra (Generic Cell Rate Algorithm; the default)", revision 2.
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
    if stored == nil then
      -- A block after the tat (lua/common.lua block_join), met by a policy without
      -- block= (its rule dropped the option): decided on the tat alone, the block kept
      -- while it lasts, as memory:// does. Off the common path: tonumber failed.
      if find(raw, ':', 1, true) then
        return beside_block(key, now, 'gcra', DECIDERS['gcra'], key, now, p, cost)
      end
      corrupt()
    end
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

-- delay=D (docs/algorithms.md, "Waiting"; src/core/delay.h DelayGcra): a request that fits at
-- s = max(now, tat + c*E - tau) with s - now <= D is admitted, charged as a decision at s.
-- `not_before` and `max_wait` are a multi-decision's window (lua/batch.lua wait_group;
-- alone: now and D): s is no earlier than not_before, admitted when s - now <= max_wait.
DELAYED['gcra'] = function(key, now, p, cost, not_before, max_wait)
  local emission, tau = p.emission, p.tau
  local tat = now
  local raw = get(key)
  if raw then
    local stored = tonumber(raw)
    if stored == nil then
      if find(raw, ':', 1, true) then  -- a block a rule without delay= left: as above
        return beside_block(key, now, 'gcra', DELAYED['gcra'], key, now, p, cost, not_before,
                            max_wait)
      end
      corrupt()
    end
    if stored > now then tat = stored end
  end
  local room = now + tau - tat
  if room < 0 then room = 0 end
  if cost == 0 or cost > p.burst then  -- a peek, or never: as without delay
    return delayed(cost == 0, floor(room / emission), cost == 0 and 0 or -1, tat - now)
  end
  max_wait = max_wait or p.delay
  local wait = max(0, tat + cost * emission - tau - now, (not_before or now) - now)
  if wait > max_wait then return delayed(false, 0, wait - max_wait, tat - now) end
  -- Charged as a decision at s: tat moves up to s first (alone, s <= tat: c*E <= tau).
  local new = max(tat, now + wait) + cost * emission
  save(key, format('%d', new), new - now)
  local remaining = 0
  if wait == 0 then remaining = floor((now + tau - new) / emission) end
  return delayed(true, remaining, wait, new - now)
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

-- Reservations (docs/reservations.md): the mark is the tat the reservation left.
MARK['gcra'] = function(key, now, p)
  -- A reserve by a policy without block= on a blocked key wrote '<tat>:<until>'.
  local raw = get(key)
  return now, tonumber(raw) or tonumber((block_split('gcra', raw))), 0
end

SETTLE['gcra'] = function(key, now, p, r, actual)
  local emission = p.emission
  local raw = get(key)
  local stored = raw and tonumber(raw)
  if raw and stored == nil then corrupt() end
  local value
  -- A lease's return refunds only while the key is as its take left it (src/core/settle.h).
  if actual < r.estimate and stored and stored > now and (not r.lease or stored == r.mark) then
    -- The unused tail of the reservation's span, as far as it is still ahead of now.
    local refund = min((r.estimate - actual) * emission, max(0, r.mark - now))
    if refund > 0 then value = stored - refund end
  elseif actual > r.estimate then
    local tat = now
    if stored and stored > now then tat = stored end
    local ceiling = now + p.tau + FG.MAX_SETTLE_WAIT
    local extra = actual - r.estimate
    if extra <= floor((ceiling - tat) / emission) then
      value = tat + extra * emission
    else
      value = ceiling
    end
  end
  return settle_value(key, now, p, value and int_string(value))
end


-- A bare batch of gcra decisions: the floor lua/batch.lua's Redis CPU is measured against.
--
-- bench/redis_bench.py drives it with redis-benchmark, a fixed number of keys per call. Not loaded
-- by floodgate.
--
-- Same calling convention as lua/batch.lua, so Redis parses exactly the arguments
-- floodgate sends: KEYS[i] = the key of decision i;
--   ARGV = {p, p x (kind, limit, period_us, burst), g, g x (group: 5 values),
--           n x (policy number, now, cost)}
-- (g is 0 here: one limit per decision, no multi-decision group).
-- and the same reply: 4 integers per decision (allowed, remaining, retry_after_us,
-- reset_after_us). Same gcra as lua/gcra.lua in whole µs (docs/algorithms.md, revision 2):
-- E = ceil(P / L), tau = B * E, tat = max(stored or now, now); a cost above B is denied;
-- new = tat + c * E, diff = now + tau - new, admitted iff diff >= 0, which stores new
-- with PX ceil((new - now) / 1000) ms. What it leaves out is what a floor may: argument
-- validation (it trusts every argument and reads `now` as always empty: TIME, once),
-- the kind dispatch, and the helper calls. It reads every key with one MGET, as
-- lua/batch.lua does (a GET per key costs Redis more than the decision around it), and
-- keeps each key's tat as it writes it, so a key repeated in one call sees the earlier
-- decisions. Every number handed to redis.call goes
-- through string.format('%d'): exact at 16 digits (a Lua number would be formatted with
-- 14), and cheaper than the '%.14g' Redis would format a Lua number with.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local p = tonumber(ARGV[1])
local emissions, taus, bursts = {}, {}, {}
for j = 1, p do
  local limit = tonumber(ARGV[4 * j - 1])
  local emission = math.floor((tonumber(ARGV[4 * j]) + limit - 1) / limit)
  local burst = tonumber(ARGV[4 * j + 1])
  emissions[j], taus[j], bursts[j] = emission, burst * emission, burst
end
local stored = redis.call('MGET', unpack(KEYS))
local tats = {}  -- key -> its tat as read or last written, so a repeated key sees its writes
for i = 1, #KEYS do tats[KEYS[i]] = tonumber(stored[i] or 0) end
local out = {}
local at = 3 + 4 * p + 5 * tonumber(ARGV[2 + 4 * p])
for i = 1, #KEYS do
  local j = tonumber(ARGV[at])
  local cost = tonumber(ARGV[at + 2])
  at = at + 3
  local emission, tau = emissions[j], taus[j]
  local key = KEYS[i]
  local tat = tats[key]
  if tat < now then tat = now end
  local room = now + tau - tat
  if room < 0 then room = 0 end
  local o = 4 * i
  if cost == 0 then  -- peek
    out[o - 3], out[o - 2], out[o - 1], out[o] = 1, math.floor(room / emission), 0, tat - now
  elseif cost > bursts[j] then  -- can never fit
    out[o - 3], out[o - 2], out[o - 1], out[o] = 0, math.floor(room / emission), -1, tat - now
  else
    local new = tat + cost * emission
    local diff = now + tau - new
    if diff >= 0 then
      redis.call('SET', key, string.format('%d', new), 'PX',
                 string.format('%d', math.ceil((new - now) / 1000)))
      tats[key] = new
      out[o - 3], out[o - 2], out[o - 1], out[o] = 1, math.floor(diff / emission), 0, new - now
    else
      out[o - 3], out[o - 2], out[o - 1], out[o] = 0, math.floor(room / emission), -diff,
                                                    tat - now
    end
  end
end
return out

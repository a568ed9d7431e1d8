-- One bare gcra decision per call: the ceiling's script in bench/redis_bench.py.
--
-- What a user writing a lean one-script-per-decision limiter would run, and so the strongest honest
-- ceiling for gcra (driven with redis-benchmark next to lua/single.lua, the better of the two is
-- the ceiling). Not loaded by floodgate.
--
-- Same calling convention as lua/single.lua, so Redis parses exactly the arguments
-- floodgate sends: KEYS[1] = the key;
--   ARGV = {kind, now ('' = the server clock), limit, period_us, burst, cost}
-- and the same reply: {allowed, remaining, retry_after_us, reset_after_us}. Same gcra as
-- lua/gcra.lua in whole µs (docs/algorithms.md, revision 2): E = ceil(P / L), tau = B * E,
-- tat = max(stored or now, now); a cost of 0 peeks, a cost above B is denied with
-- retry -1; new = tat + c * E, diff = now + tau - new, admitted iff diff >= 0, which
-- stores new with PX ceil((new - now) / 1000) ms. What it leaves out is what lua/single.lua
-- pays per call beyond the decision: the chunk setup of common.lua (its helper closures
-- and tables, built again on every call), argument validation (it trusts every argument,
-- like bare_batch_gcra.lua), the kind dispatch, and the 60 s TTL floor lua/common.lua
-- gives states written at an explicit `now` (a TTL, never a decision). Every number
-- handed to redis.call goes through string.format('%d'): exact at 16 digits.
-- redis_bench.py checks its answers against lua/single.lua's before it runs.
local now = ARGV[2]
if now == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(now)
end
local limit, burst, cost = tonumber(ARGV[3]), tonumber(ARGV[5]), tonumber(ARGV[6])
local emission = math.floor((tonumber(ARGV[4]) + limit - 1) / limit)
local tau = burst * emission
local key = KEYS[1]
local tat = now
local stored = tonumber(redis.call('GET', key) or 0)
if stored > now then tat = stored end
local room = now + tau - tat
if room < 0 then room = 0 end
if cost == 0 then  -- peek
  return {1, math.floor(room / emission), 0, tat - now}
end
if cost > burst then  -- can never fit
  return {0, math.floor(room / emission), -1, tat - now}
end
local new = tat + cost * emission
local diff = now + tau - new
if diff >= 0 then
  redis.call('SET', key, string.format('%d', new), 'PX',
             string.format('%d', math.ceil((new - now) / 1000)))
  return {1, math.floor(diff / emission), 0, new - now}
end
return {0, math.floor(room / emission), -diff, tat - now}

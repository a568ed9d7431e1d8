-- A bare gcra reserve with a record per reservation: a floor for lua/reservation.lua.
--
-- With bench/bare_settle_gcra.lua, the floor that lua/reservation.lua's Redis CPU per reserve +
-- settle is measured against (bench/reserve_bench.py), as bench/bare_batch_gcra.lua is for a check.
-- Not loaded by floodgate.
--
-- Same arguments as lua/reservation.lua, so Redis parses what floodgate sends:
--   ARGV = {p, p x (kind, limit, period_us, burst), n, n x (r, policy number, now,
--           estimate, hold_us)}, 2 KEYS per operation: the limit's key, the record's;
-- and its reply but the last field (acquired_at, 0 for a reserve): 6 integers per
-- operation (outcome, allowed, limit, remaining, retry_after_us, reset_after_us), then the
-- clock. The same gcra as lua/gcra.lua (E = ceil(P / L), tau = B * E, admitted iff
-- now + tau - (tat + c * E) >= 0); an admitted reserve writes the key and a record of
-- what its settle needs (E, tau, L, the tat it left, the estimate, when the hold ends: 6
-- packed doubles; then the key) that expires with the hold. What it leaves out is what a floor may: argument validation
-- (every operation is a reserve, `now` is always the server clock, read once), the other
-- algorithms, and the helper calls. Loaded alone, as a floor must be, so it repeats
-- bare_batch_gcra.lua's policy loop rather than share it.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local p = tonumber(ARGV[1])
local emissions, taus, limits = {}, {}, {}
for j = 1, p do
  local limit = tonumber(ARGV[4 * j - 1])
  local emission = math.floor((tonumber(ARGV[4 * j]) + limit - 1) / limit)
  emissions[j], taus[j], limits[j] = emission, tonumber(ARGV[4 * j + 1]) * emission, limit
end
local states = {}
for i = 1, #KEYS, 2 do states[#states + 1] = KEYS[i] end
local stored = redis.call('MGET', unpack(states))
local tats = {}  -- key -> its tat as read or last written, so a repeated key sees its writes
for i = 1, #states do tats[states[i]] = tonumber(stored[i] or 0) end
local out = {}
local at = 3 + 4 * p
for i = 1, #states do
  local j = tonumber(ARGV[at + 1])
  local estimate, hold = tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4])
  at = at + 5
  local emission, tau = emissions[j], taus[j]
  local key = states[i]
  local tat = tats[key]
  if tat < now then tat = now end
  local new = tat + estimate * emission
  local diff = now + tau - new
  local o = 6 * i
  if diff >= 0 then
    local mark = string.format('%d', new)
    redis.call('SET', key, mark, 'PX', string.format('%d', math.ceil((new - now) / 1000)))
    tats[key] = new
    redis.call('SET', KEYS[2 * i],
               struct.pack('<dddddd', emission, tau, limits[j], new, estimate, now + hold) .. key,
               'PX', string.format('%d', math.ceil(hold / 1000)))
    out[o - 5], out[o - 4], out[o - 3], out[o - 2], out[o - 1], out[o] =
        1, 1, limits[j], math.floor(diff / emission), 0, new - now
  else
    local room = now + tau - tat
    if room < 0 then room = 0 end
    out[o - 5], out[o - 4], out[o - 3], out[o - 2], out[o - 1], out[o] =
        1, 0, limits[j], math.floor(room / emission), -diff, tat - now
  end
end
out[#out + 1] = now
return out

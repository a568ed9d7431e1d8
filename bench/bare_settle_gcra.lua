-- A bare gcra settle: the floor lua/reservation.lua's settles are measured against.
--
-- It settles bench/bare_reserve_gcra.lua's reservations (see there). Not loaded by floodgate.
--
-- Same arguments as lua/reservation.lua's settles: ARGV = {0, n, n x (s, now, actual)},
-- 1 KEY per operation: the record's; its reply but the last field (acquired_at, 0 for a
-- settle): 6 integers per operation, then the clock. Each settle reads its record (one
-- MGET for all), then its key (one MGET for all), gives back what lua/gcra.lua's settle
-- gives back (the unused estimate, as far as its span is still ahead of now) or charges
-- the excess, writes the key when that changed it, and answers the key's peek; the
-- records go with one DEL. Left out, as a
-- floor may: validation (every operation is a settle at the server clock), the record
-- already settled or never made, and an excess that would take the key past its cap.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local records = redis.call('MGET', unpack(KEYS))
local keys = {}
for i = 1, #KEYS do keys[i] = string.sub(records[i], 49) end
local stored = redis.call('MGET', unpack(keys))
local tats = {}  -- key -> its tat as read or last written, so a repeated key sees its writes
for i = 1, #keys do tats[keys[i]] = tonumber(stored[i] or 0) end
local out = {}
for i = 1, #KEYS do
  local emission, tau, limit, mark, estimate, ends = struct.unpack('<dddddd', records[i])
  local key = keys[i]
  local o = 6 * i
  if ends <= now then  -- the hold ended: nothing to settle
    out[o - 5], out[o - 4], out[o - 3], out[o - 2], out[o - 1], out[o] = 2, 0, 0, 0, 0, 0
  else
    local actual = tonumber(ARGV[2 + 3 * i])
    local tat = tats[key]
    if tat < now then tat = now end
    local settled = tat
    if actual < estimate then
      settled = tat - math.min((estimate - actual) * emission, math.max(0, mark - now))
    elseif actual > estimate then
      settled = tat + (actual - estimate) * emission
    end
    if settled ~= tat then
      if settled > now then
        redis.call('SET', key, string.format('%d', settled), 'PX',
                   string.format('%d', math.ceil((settled - now) / 1000)))
      else
        redis.call('DEL', key)  -- back to fresh
        settled = now
      end
      tats[key] = settled
    end
    local room = now + tau - settled
    if room < 0 then room = 0 end
    out[o - 5], out[o - 4], out[o - 3], out[o - 2], out[o - 1], out[o] =
        1, 1, limit, math.floor(room / emission), 0, settled - now
  end
end
redis.call('DEL', unpack(KEYS))
out[#out + 1] = now
return out

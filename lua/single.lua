-- Driver: one decision. KEYS[1] = the store key (algorithms.md, "Store keys");
-- ARGV = {kind, now ('' = the server clock), limit, period_us, burst, cost}.
-- Returns {allowed (1|0), remaining, retry_after_us, reset_after_us}; the caller adds
-- limit. Assembled after common.lua and the algorithm file(s) that define DECIDERS.
if #KEYS ~= 1 or #ARGV ~= 6 then
  return redis.error_reply('floodgate: expected 1 key and 6 arguments '
                           .. '(kind, now, limit, period_us, burst, cost)')
end
local request, why = FG.parse(ARGV, 0)
if not request then return redis.error_reply('floodgate: ' .. why) end
return FG.decide(KEYS[1], request, not request.now and FG.server_now())

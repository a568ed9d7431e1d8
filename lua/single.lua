-- Driver: one decision per call (batching off).
--
-- KEYS[1] = the store key (docs/algorithms.md, "Store keys");
-- ARGV = {kind, now, limit, period_us, burst, cost} (now: '' = the server clock).
-- Returns {allowed, remaining, retry_after_us, reset_after_us} (allowed: 1|0); the caller
-- adds limit. Assembled after common.lua and the algorithm file(s) that define DECIDERS.
-- The layouts of every driver: src/store/redis/script_layout.h, lua/README.md.
if #KEYS ~= 1 or #ARGV ~= 6 then
  return redis.error_reply('floodgate: expected 1 key and 6 arguments '
                           .. '(kind, now, limit, period_us, burst, cost)')
end
local why = FG.check_policy(ARGV[1], ARGV[3], ARGV[4], ARGV[5])
            or FG.check_request(ARGV[2], ARGV[6])
if why then return redis.error_reply('floodgate: ' .. why) end
local policy = FG.policy(ARGV[1], ARGV[3], ARGV[4], ARGV[5])
local now = FG.set_clock(ARGV[2], ARGV[2] == '' and FG.server_now())
return {policy.decide(KEYS[1], now, policy, tonumber(ARGV[6]))}

-- Driver: n decisions in one call, in order, each exactly as if it ran alone (a later
-- decision on the same key sees the earlier one's write). KEYS[i] = the key of decision
-- i; ARGV holds 6 values per decision, as in single.lua: kind, now ('' = the server
-- clock), limit, period_us, burst, cost. Returns a flat array of 4*n integers: allowed
-- (1|0), remaining, retry_after_us, reset_after_us per decision.
-- Every decision is validated before any runs, so bad input never applies half a batch.
-- TIME is read at most once, so all clock-timed decisions of a batch share one now.
if #ARGV ~= 6 * #KEYS then
  return redis.error_reply('floodgate: expected 6 arguments per key '
                           .. '(kind, now, limit, period_us, burst, cost)')
end
local requests = {}
local needs_clock = false
for i = 1, #KEYS do
  local request, why = FG.parse(ARGV, 6 * (i - 1))
  if not request then
    return redis.error_reply(string.format('floodgate: decision %d: %s', i, why))
  end
  requests[i] = request
  if not request.now then needs_clock = true end
end
local clock = needs_clock and FG.server_now()
local out = {}
for i, request in ipairs(requests) do
  local d = FG.decide(KEYS[i], request, clock)
  out[4 * i - 3], out[4 * i - 2], out[4 * i - 1], out[4 * i] = d[1], d[2], d[3], d[4]
end
return out

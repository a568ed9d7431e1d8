-- Driver: n decisions in one call, in order, each exactly as if it ran alone (a later
-- decision on the same key sees the earlier one's write). KEYS[i] = the key of decision
-- i. The decisions of a batch usually share their policy, so policies are sent once:
--   ARGV = {p, then p policies of 4 values (kind, limit, period_us, burst), then 3
--           values per decision (its policy's number 1..p, now ('' = the server
--           clock), cost)}
-- which halves the arguments Redis parses per decision. Returns a flat array of 4*n
-- integers: allowed (1|0), remaining, retry_after_us, reset_after_us per decision.
-- Every argument is checked before any decision runs, so bad input never applies half
-- a batch. TIME is read at most once, so all clock-timed decisions share one now.
local p = FG.parse_int(ARGV[1] or '', 1, 1024)
if not p or #ARGV ~= 1 + 4 * p + 3 * #KEYS then
  return redis.error_reply('floodgate: expected ARGV = {p, p x (kind, limit, period_us, '
                           .. 'burst), n x (policy, now, cost)}')
end
local policies = {}
for j = 1, p do
  local at = 4 * j - 2
  local why = FG.check_policy(ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3])
  if why then return redis.error_reply(string.format('floodgate: policy %d: %s', j, why)) end
  policies[j] = FG.policy(ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3])
end
-- A batch repeats the same few strings (policy numbers, costs, an empty now): each
-- distinct one is checked and converted once, and the decisions below reuse the numbers.
local policy_of, cost_of = {}, {}
local first = 2 + 4 * p  -- the first decision's policy number
local needs_clock = false
for i = 1, #KEYS do
  local at = first + 3 * (i - 1)
  local number, now, cost = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  local why
  if policy_of[number] == nil then
    local j = FG.parse_int(number, 1, p)
    if j then policy_of[number] = policies[j] else why = 'policy number out of range' end
  end
  if not why and (now ~= '' or cost_of[cost] == nil) then
    why = FG.check_request(now, cost)
    if not why then cost_of[cost] = tonumber(cost) end
  end
  if why then
    return redis.error_reply(string.format('floodgate: decision %d: %s', i, why))
  end
  if now == '' then needs_clock = true end
end
local clock = needs_clock and FG.server_now()
local out = {}
for i = 1, #KEYS do
  local at = first + 3 * (i - 1)
  local policy = policy_of[ARGV[at]]
  local o = 4 * (i - 1)
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] =
      policy.decide(KEYS[i], FG.set_clock(ARGV[at + 1], clock), policy, cost_of[ARGV[at + 2]])
end
return out

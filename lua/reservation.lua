-- Driver: reservations (docs/reservations.md), n operations in one call, in order, each
-- exactly as if it ran alone. Assembled after common.lua and every algorithm file.
--   ARGV = {n, then per operation either
--     'r', now, kind, limit, period_us, burst, estimate, hold_us   (2 KEYS: the limit's
--                                                                   key, the record's)
--     's', now, actual                                             (1 KEY: the record's)}
--   now: '' = the server clock.
-- A reserve decides the limit's key at cost = estimate and, when allowed, writes the
-- record: what the settle needs (the policy, the mark, when the hold ends, the limit's
-- key), expiring with the hold. A settle reads and deletes the record, then settles the
-- limit's key. The record's key is in the limit key's slot (the caller picks it so), so a
-- cluster node holds both. Returns 6 integers per operation: outcome (1 done; a settle's
-- 0: no such record, 2: its hold had ended), allowed, limit, remaining, retry_after_us,
-- reset_after_us; then the server clock it read (0: none).
-- Every argument is checked before any operation runs.
local n = FG.parse_int(ARGV[1] or '', 1, 1024)
if not n then
  return redis.error_reply('floodgate: expected ARGV = {n, then per operation r, now, kind, '
                           .. 'limit, period_us, burst, estimate, hold_us or s, now, actual}')
end
local ops = {}
local a, k = 2, 1
local needs_clock = false
for i = 1, n do
  local op, now_arg = ARGV[a], ARGV[a + 1] or ''
  local why
  if op == 'r' then
    why = FG.check_policy(ARGV[a + 2] or '', ARGV[a + 3] or '', ARGV[a + 4] or '',
                          ARGV[a + 5] or '')
          or FG.check_request(now_arg, ARGV[a + 6] or '')
    local hold = FG.parse_int(ARGV[a + 7] or '', 1000, 86400000000)
    if not why and not hold then why = 'hold_us must be an integer in [1ms, 24h]' end
    if not why and tonumber(ARGV[a + 6]) < 1 then why = 'estimate must be at least 1' end
    if not why and not KEYS[k + 1] then why = 'a reserve takes 2 keys' end
    if not why then
      ops[i] = {reserve = true, now = now_arg, key = KEYS[k], record = KEYS[k + 1],
                p = FG.policy(ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5]),
                estimate = tonumber(ARGV[a + 6]), hold = hold}
    end
    a, k = a + 8, k + 2
  elseif op == 's' then
    why = FG.check_request(now_arg, ARGV[a + 2] or '')
    if not why and not KEYS[k] then why = 'a settle takes 1 key' end
    if not why then ops[i] = {now = now_arg, record = KEYS[k], actual = tonumber(ARGV[a + 2])} end
    a, k = a + 3, k + 1
  else
    why = 'operation must be r (reserve) or s (settle)'
  end
  if why then return redis.error_reply(string.format('floodgate: operation %d: %s', i, why)) end
  if now_arg == '' then needs_clock = true end
end
if a ~= #ARGV + 1 or k ~= #KEYS + 1 then
  return redis.error_reply('floodgate: the operations do not use every argument and key')
end
local clock = needs_clock and FG.server_now()
local out = {}

-- The record: 8 doubles (limit, period_us, burst, at, estimate, mark, deficit, the end
-- of the hold), then '<kind>:<the limit's key>'. Every number is below 2^53 or a double
-- already (deficit), so the doubles hold them exactly.
local RECORD_NUMBERS = '<dddddddd'
local RECORD_HEAD = 64

local function reserve(op, now)
  local p = op.p
  local allowed, remaining, retry, reset = p.decide(op.key, now, p, op.estimate)
  if allowed == 1 then
    local at, mark, deficit = MARK[p.kind](op.key, now, p)
    redis.call('SET', op.record,
               struct.pack(RECORD_NUMBERS, p.limit, p.period, p.burst, at, op.estimate, mark,
                           deficit, now + op.hold) .. p.kind .. ':' .. op.key,
               'PX', ttl_ms(op.hold))
  end
  return 1, allowed, p.limit, remaining, retry, reset
end

local function settle(op, now)
  local raw = redis.call('GET', op.record)
  if not raw then return 0, 0, 0, 0, 0, 0 end
  redis.call('DEL', op.record)
  if #raw <= RECORD_HEAD then corrupt() end
  local limit, period, burst, at, estimate, mark, deficit, ends =
      struct.unpack(RECORD_NUMBERS, string.sub(raw, 1, RECORD_HEAD))
  if ends <= now then return 2, 0, 0, 0, 0, 0 end
  local rest = string.sub(raw, RECORD_HEAD + 1)
  local colon = string.find(rest, ':', 1, true)
  if not colon or DECIDERS[string.sub(rest, 1, colon - 1)] == nil then corrupt() end
  local p = FG.policy(string.sub(rest, 1, colon - 1), limit, period, burst)
  local allowed, remaining, retry, reset =
      SETTLE[p.kind](string.sub(rest, colon + 1), now, p,
                     {at = at, estimate = estimate, mark = mark, deficit = deficit}, op.actual)
  return 1, allowed, p.limit, remaining, retry, reset
end

for i = 1, n do
  local op = ops[i]
  local now = FG.set_clock(op.now, clock)
  local o = 6 * (i - 1)
  if op.reserve then
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = reserve(op, now)
  else
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = settle(op, now)
  end
end
out[#out + 1] = clock or 0
return out

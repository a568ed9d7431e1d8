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
-- A call's operations mostly share their policy, estimate, hold and now: each distinct
-- string is checked and converted once (as lua/batch.lua does).
local policies, numbers = {}, {}
local function policy_of(kind, limit, period, burst)
  local id = kind .. ' ' .. limit .. ' ' .. period .. ' ' .. burst
  local p = policies[id]
  if p == nil then
    local why = FG.check_policy(kind, limit, period, burst)
    if why then return nil, why end
    p = FG.policy(kind, limit, period, burst)
    policies[id] = p
  end
  return p
end
local function cost_of(s)  -- a checked cost (estimate, actual), or nil
  local c = numbers[s]
  if c == nil then
    c = FG.parse_int(s, 0, FG.MAX_COST) or false
    numbers[s] = c
  end
  return c or nil
end
local ops = {}
local a, k = 2, 1
local needs_clock = false
for i = 1, n do
  local op, now_arg = ARGV[a], ARGV[a + 1] or ''
  local why
  if now_arg ~= '' and not FG.parse_int(now_arg, 0, FG.MAX_TIME) then
    why = 'now must be empty or an integer count of microseconds'
  elseif op == 'r' then
    local p
    p, why = policy_of(ARGV[a + 2] or '', ARGV[a + 3] or '', ARGV[a + 4] or '', ARGV[a + 5] or '')
    local estimate = cost_of(ARGV[a + 6] or '')
    local hold = FG.parse_int(ARGV[a + 7] or '', 1000, 86400000000)
    if not why and not estimate then why = 'cost must be an integer in [0, 1000000000]' end
    if not why and not hold then why = 'hold_us must be an integer in [1ms, 24h]' end
    if not why and estimate < 1 then why = 'estimate must be at least 1' end
    if not why and not KEYS[k + 1] then why = 'a reserve takes 2 keys' end
    if not why then
      ops[i] = {reserve = true, now = now_arg, key = KEYS[k], record = KEYS[k + 1], p = p,
                estimate = estimate, hold = hold}
    end
    a, k = a + 8, k + 2
  elseif op == 's' then
    local actual = cost_of(ARGV[a + 2] or '')
    if not actual then why = 'cost must be an integer in [0, 1000000000]' end
    if not why and not KEYS[k] then why = 'a settle takes 1 key' end
    if not why then ops[i] = {now = now_arg, record = KEYS[k], actual = actual} end
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

-- Reads ahead, as lua/batch.lua does: one MGET for the records the settles name and the
-- string states the reserves decide on, then one for the string states the records
-- name. Records: record key -> value or false (absent), never written by a settle.
local records = {}
local function read_ahead(wanted)
  for from = 1, #wanted, 1000 do  -- chunks bound the Lua C stack unpack() uses
    local chunk = {unpack(wanted, from, min(from + 999, #wanted))}
    local values = redis.call('MGET', unpack(chunk))
    for j = 1, #chunk do
      local key = chunk[j]
      if records[key] ~= nil then records[key] = values[j] else known[key] = values[j] end
    end
  end
end
do
  local wanted = {}
  for i = 1, n do
    local op = ops[i]
    if op.reserve then
      if op.p.kind ~= 'sl' and known[op.key] == nil then
        known[op.key] = false  -- a placeholder, overwritten by the read
        wanted[#wanted + 1] = op.key
      end
    elseif records[op.record] == nil then
      records[op.record] = false
      wanted[#wanted + 1] = op.record
    end
  end
  read_ahead(wanted)
  -- The records' limits: parsed once here, so each settle below finds its policy.
  wanted = {}
  for i = 1, n do
    local op = ops[i]
    local raw = not op.reserve and records[op.record]
    if raw then
      if #raw <= RECORD_HEAD then corrupt() end
      local rest = string.sub(raw, RECORD_HEAD + 1)
      local colon = find(rest, ':', 1, true)
      local kind = colon and string.sub(rest, 1, colon - 1)
      if not kind or DECIDERS[kind] == nil then corrupt() end
      op.kind, op.key = kind, string.sub(rest, colon + 1)
      if kind ~= 'sl' and known[op.key] == nil then
        known[op.key] = false
        wanted[#wanted + 1] = op.key
      end
    end
  end
  read_ahead(wanted)
end

local function reserve(op, now)
  local p = op.p
  local allowed, remaining, retry, reset = p.decide(op.key, now, p, op.estimate)
  if allowed == 1 then
    local at, mark, deficit = MARK[p.kind](op.key, now, p)
    local record = struct.pack(RECORD_NUMBERS, p.limit, p.period, p.burst, at, op.estimate, mark,
                               deficit, now + op.hold) .. p.kind .. ':' .. op.key
    redis.call('SET', op.record, record, 'PX', ttl_ms(op.hold))
    records[op.record] = record
  end
  return 1, allowed, p.limit, remaining, retry, reset
end

-- Settled records, deleted together at the end (one call): a record is read by nothing
-- else in this script, and settling it twice is refused through `records` meanwhile.
local settled = {}
local record_policies = {}
local function settle(op, now)
  local raw = records[op.record]
  if not raw then return 0, 0, 0, 0, 0, 0 end
  records[op.record] = false
  settled[#settled + 1] = op.record
  local limit, period, burst, at, estimate, mark, deficit, ends =
      struct.unpack(RECORD_NUMBERS, string.sub(raw, 1, RECORD_HEAD))
  if ends <= now then return 2, 0, 0, 0, 0, 0 end
  -- The record's policy, prepared once per call: its kind and 3 first numbers name it.
  local id = op.kind .. string.sub(raw, 1, 24)
  local p = record_policies[id]
  if p == nil then
    p = FG.policy(op.kind, limit, period, burst)
    record_policies[id] = p
  end
  local allowed, remaining, retry, reset =
      SETTLE[p.kind](op.key, now, p, {at = at, estimate = estimate, mark = mark,
                                      deficit = deficit}, op.actual)
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
-- A record a reserve wrote after its settle in this call (a colliding random id) stays.
local gone = {}
for j = 1, #settled do
  if records[settled[j]] == false then gone[#gone + 1] = settled[j] end
end
for from = 1, #gone, 1000 do
  redis.call('DEL', unpack(gone, from, min(from + 999, #gone)))
end
out[#out + 1] = clock or 0
return out

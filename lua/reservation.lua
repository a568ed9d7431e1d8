-- Driver: reserves, settles, acquires and releases, n operations in one call, in order.
--
-- Each exactly as if it ran alone (docs/reservations.md, docs/leases.md). Assembled after
-- common.lua and every algorithm file.
-- The reserves of a call usually share their policy, so policies are sent once:
--   ARGV = {p, then p policies of 4 values: kind, limit, period_us, burst
--           n, then per operation either
--     r, policy, now, estimate, hold_us     (2 KEYS: the limit's key, the record's)
--     s, now, actual                        (1 KEY: the record's)
--     A, policy, now, random                (1 KEY: the concurrency key)
--     L, now, actual, member                (1 KEY: the concurrency key)
--     a, policy, random                     ('A' at the server clock)
--     l, member                             ('L' at the server clock, at 0)
--     t, policy, now, up_to, lifetime_us    (take, lua/take.lua; 2 KEYS as 'r')}
--   policy: its number 1..p; now: '' = the server clock. Every argument costs Redis about
--   1,000 instructions (an object made, pushed into ARGV, freed: callgrind'd
--   redis-server), so the acquires and releases most requests make, at the server clock,
--   have forms without now and cost. The layouts of every driver:
--   src/store/redis/script_layout.h, lua/README.md.
-- A reserve decides the limit's key at cost = estimate and, when allowed, writes the
-- record: what the settle needs (the policy, the mark, when the hold ends, the limit's
-- key), expiring with the hold. A settle reads and deletes the record, then settles the
-- limit's key. The record's key is in the limit key's slot (the caller picks it so), so a
-- cluster node holds both. A concurrency limit's reserve is an acquire ('A'), which keeps
-- no record: its lease is a member of the key, '<random>.<T>.<N>.<acquire time>' (random:
-- the caller's 16 characters; lua/concurrency.lua); its release ('L', a settle at
-- `actual`) names that member, which the lease's id carries. Returns 7 integers per
-- operation: outcome, allowed, limit, remaining, retry_after_us, reset_after_us, acquired_at
-- (outcome: 1 done; a settle's or release's 0: no such record or lease, 2: its hold or
-- lease time had ended, 3: a lease settled at a cost, refused and still held; acquired_at:
-- an admitted acquire's acquire time, the end of its member, 0 for any other); then the
-- server clock it read (0: none). A take answers as a reserve, with the units leased in
-- place of the acquire time and, when it leased any, the lease's length (µs from now) in
-- place of retry_after_us (0 in any allowed decision). Its record's kind carries a '+': a
-- lease, whose return refunds as src/core/settle.h's MayRefund says.
-- Every argument is checked before any operation runs.
-- Locals: the parse below reads them a few times per operation (1.6% of a reserve +
-- settle's Redis instructions as globals, measured).
local ARGV, KEYS = ARGV, KEYS
local p_count = FG.parse_int(ARGV[1] or '', 0, 1024)
local n = p_count and FG.parse_int(ARGV[2 + 4 * p_count] or '', 1, 1024)
if not n then
  return redis.error_reply('floodgate: expected ARGV = {p, p x (kind, limit, period_us, '
                           .. 'burst), n, then per operation r, policy, now, estimate, '
                           .. 'hold_us or s, now, actual or A, policy, now, random or L, '
                           .. 'now, actual, member or a, policy, random or l, member}')
end
local policies, bad_policy = FG.argv_policies(p_count)
if not policies then return bad_policy end
for j = 1, p_count do
  -- A record keeps its policy's period, which a calendar window (tz=) has not: Store's
  -- ValidateReserveRequest refuses them, so this is the scripts' own guard.
  if policies[j].cal then
    return redis.error_reply(string.format('floodgate: policy %d: reservations are not for '
                                           .. 'calendar windows', j))
  end
end
-- A call's operations mostly share their policy number, estimate, hold and now: each
-- distinct string is checked and converted once (as lua/batch.lua does). A string seen
-- already is read from its cache inline, without the call (most are: ~2% of a reserve +
-- settle, measured).
local policy_of, cost_of, hold_of = {}, {}, {}
local cached = FG.cached_int
-- The operations, parsed: per operation i, its policy (false: a settle or release), now
-- argument, cost (the estimate or the actual), hold, keys, and for an acquire or release
-- its lease's random part or member (op_lease). Flat arrays: no table per operation.
local op_policy, op_now, op_cost, op_hold, op_key, op_record = {}, {}, {}, {}, {}, {}
local op_lease = {}
local a, k = 3 + 4 * p_count, 1
local needs_clock = false
local NOW_AT = {r = 2, s = 1, A = 2, L = 1, t = 2}
local op_take = {}  -- where an operation's now is (a, l: none)
for i = 1, n do
  local op = ARGV[a]
  local now_at = NOW_AT[op]
  local now_arg = now_at and ARGV[a + now_at] or ''
  local why
  if now_arg ~= '' and not FG.parse_int(now_arg, 0, FG.MAX_TIME) then
    why = 'now must be empty or an integer count of microseconds'
  elseif op == 'r' or op == 't' then  -- a take's arguments are a reserve's: up_to, lifetime
    local what = op == 'r' and 'reserve' or 'take'
    local p_arg, estimate_arg, hold_arg = ARGV[a + 1] or '', ARGV[a + 3] or '', ARGV[a + 4] or ''
    local p = policy_of[p_arg] or cached(policy_of, p_arg, 1, p_count)
    local estimate = cost_of[estimate_arg] or cached(cost_of, estimate_arg, 0, FG.MAX_COST)
    local hold = hold_of[hold_arg] or cached(hold_of, hold_arg, 1000, 86400000000)
    if not p then
      why = 'policy number out of range'
    elseif not estimate then
      why = 'cost must be an integer in [0, 1000000000]'
    elseif not hold then
      why = 'hold_us must be an integer in [1ms, 24h]'
    elseif estimate < 1 then
      why = 'estimate must be at least 1'
    elseif not KEYS[k + 1] then
      why = 'a ' .. what .. ' takes 2 keys'
    elseif policies[p].kind == 'cc' then
      why = 'a concurrency limit takes leases: acquire (a), not ' .. what
    else
      op_policy[i], op_cost[i], op_hold[i], op_take[i] = policies[p], estimate, hold, op == 't'
      op_key[i], op_record[i] = KEYS[k], KEYS[k + 1]
    end
    a, k = a + 5, k + 2
  elseif op == 's' then
    local actual_arg = ARGV[a + 2] or ''
    local actual = cost_of[actual_arg] or cached(cost_of, actual_arg, 0, FG.MAX_COST)
    if not actual then
      why = 'cost must be an integer in [0, 1000000000]'
    elseif not KEYS[k] then
      why = 'a settle takes 1 key'
    else
      op_policy[i], op_cost[i], op_record[i] = false, actual, KEYS[k]
    end
    a, k = a + 3, k + 1
  elseif op == 'a' or op == 'A' then
    local short = op == 'a'
    local p_arg, random = ARGV[a + 1] or '', ARGV[a + (short and 2 or 3)] or ''
    local p = policy_of[p_arg] or cached(policy_of, p_arg, 1, p_count)
    if not p then
      why = 'policy number out of range'
    elseif policies[p].kind ~= 'cc' then
      why = 'only a concurrency limit acquires'
    elseif #random ~= 16 or find(random, '.', 1, true) then
      why = "a lease's random part is 16 characters, none a dot"
    elseif not KEYS[k] then
      why = 'an acquire takes 1 key'
    else
      op_policy[i], op_cost[i], op_key[i], op_lease[i] = policies[p], 1, KEYS[k], random
    end
    a, k = a + (short and 3 or 4), k + 1
  elseif op == 'l' or op == 'L' then
    local short = op == 'l'
    local actual_arg, member = ARGV[a + 2] or '', ARGV[a + (short and 1 or 3)] or ''
    local actual = short and 0 or cost_of[actual_arg] or
                   cached(cost_of, actual_arg, 0, FG.MAX_COST)
    if not actual then
      why = 'cost must be an integer in [0, 1000000000]'
    elseif #member == 0 then
      why = 'a release names a member'
    elseif not KEYS[k] then
      why = 'a release takes 1 key'
    else
      op_policy[i], op_cost[i], op_key[i], op_lease[i] = false, actual, KEYS[k], member
    end
    a, k = a + (short and 2 or 4), k + 1
  else
    why = 'operation must be r (reserve), s (settle), a or A (acquire), l or L (release), ' ..
          't (take)'
  end
  if why then return redis.error_reply(string.format('floodgate: operation %d: %s', i, why)) end
  op_now[i] = now_arg
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
-- A settle's record, parsed: its kind (op_kind), whether it is a take's lease
-- (op_lease_record) and the limit's key (op_key).
local op_kind, op_lease_record = {}, {}
do
  local wanted = {}
  for i = 1, n do
    if op_lease[i] then  -- nothing to read ahead: a sorted set, and no record
    elseif op_policy[i] then
      local key = op_key[i]
      if not SORTED_SET[op_policy[i].kind] and known[key] == nil then
        known[key] = false  -- a placeholder, overwritten by the read
        wanted[#wanted + 1] = key
      end
    elseif records[op_record[i]] == nil then
      records[op_record[i]] = false
      wanted[#wanted + 1] = op_record[i]
    end
  end
  read_ahead(wanted)
  -- The records' limits: parsed once here, so each settle below finds its policy.
  wanted = {}
  for i = 1, n do
    local raw = not op_policy[i] and not op_lease[i] and records[op_record[i]]
    if raw then
      if #raw <= RECORD_HEAD then corrupt() end
      local colon = find(raw, ':', RECORD_HEAD + 1, true)
      local kind = colon and string.sub(raw, RECORD_HEAD + 1, colon - 1)
      local lease = kind and string.sub(kind, -1) == '+'
      if lease then kind = string.sub(kind, 1, -2) end
      if not kind or DECIDERS[kind] == nil then corrupt() end
      op_lease_record[i] = lease
      local key = string.sub(raw, colon + 1)
      op_kind[i], op_key[i] = kind, key
      if not SORTED_SET[kind] and known[key] == nil then
        known[key] = false
        wanted[#wanted + 1] = key
      end
    end
  end
  read_ahead(wanted)
end

-- A record's PX for its hold; the same for every reserve at the server's clock with the
-- same hold, so those share one conversion.
local px_of_hold = {}
local function hold_px(hold)
  if min_ttl_ms ~= 0 then return ttl_ms(hold) end
  local px = px_of_hold[hold]
  if not px then
    px = ttl_ms(hold)
    px_of_hold[hold] = px
  end
  return px
end

local function reserve(i, now)
  local p, key, estimate, hold = op_policy[i], op_key[i], op_cost[i], op_hold[i]
  local allowed, remaining, retry, reset = p.decide(key, now, p, estimate)
  if allowed == 1 then
    local at, mark, deficit = MARK[p.kind](key, now, p)
    local record = struct.pack(RECORD_NUMBERS, p.limit, p.period, p.burst, at, estimate, mark,
                               deficit, now + hold) .. p.kind .. ':' .. key
    redis.call('SET', op_record[i], record, 'PX', hold_px(hold))
    records[op_record[i]] = record
  end
  return 1, allowed, p.limit, remaining, retry, reset, 0
end

-- A take (lua/take.lua): a reserve of the units leased, its record marked a lease and
-- held until the lease ends.
local function take(i, now)
  local p, key = op_policy[i], op_key[i]
  local raw
  if p.block > 0 then
    -- Blocked: answered as a cost-1 request (docs/algorithms.md, "Take up to k"); else
    -- the take reads the algorithm's state, and its denial starts a block through p.decide.
    local log, state, until_ = BLOCK_LOG[p.kind]
    if log then
      until_ = log(key, now)  -- and TAKE steps over it
    else
      raw = get(key)
      state, until_ = block_split(p.kind, raw)
    end
    if now < until_ then
      local allowed, remaining, retry, reset = p.decide(key, now, p, 1)
      return 1, allowed, p.limit, remaining, retry, reset, 0
    end
    if not log then known[key] = state end
  elseif BLOCK_STATE_SIZE[p.kind] then
    -- A policy without block= on a key a rule with block= left blocked: the take leases
    -- from the state before the block (its write then drops the block: docs/algorithms.md).
    local size, stored = BLOCK_STATE_SIZE[p.kind], get(key)
    if stored and (size == 0 and find(stored, ':', 1, true) or size > 0 and #stored ~= size) then
      raw = stored
      known[key] = (block_split(p.kind, raw))
    end
  end
  local units, ends, allowed, remaining, retry, reset =
      TAKE[p.kind](key, now, p, op_cost[i], op_hold[i])
  if raw ~= nil and known[key] == (block_split(p.kind, raw)) then known[key] = raw end
  if units < 1 then return 1, allowed, p.limit, remaining, retry, reset, 0 end
  local at, mark, deficit = MARK[p.kind](key, now, p)
  local record = struct.pack(RECORD_NUMBERS, p.limit, p.period, p.burst, at, units, mark,
                             deficit, ends) .. p.kind .. '+:' .. key
  redis.call('SET', op_record[i], record, 'PX', ttl_ms(ends - now))
  records[op_record[i]] = record
  return 1, 1, p.limit, remaining, ends - now, reset, units
end

-- Settled records, deleted together at the end (one call): a record is read by nothing
-- else in this script, and settling it twice is refused through `records` meanwhile.
local settled = {}
local record_policies = {}
local last_policy
local reservation = {}
local function settle(i, now)
  local record = op_record[i]
  local raw = records[record]
  if not raw then return 0, 0, 0, 0, 0, 0, 0 end
  local limit, period, burst, at, estimate, mark, deficit, ends =
      struct.unpack(RECORD_NUMBERS, raw)
  local kind = op_kind[i]
  -- A lease of an earlier floodgate kept a record (kind 'cc'); leases keep none now, and
  -- such a lease frees itself at the end of its lease time.
  if kind == 'cc' then return 0, 0, 0, 0, 0, 0, 0 end
  records[record] = false
  settled[#settled + 1] = record
  if ends <= now then return 2, 0, 0, 0, 0, 0, 0 end
  -- The record's policy, prepared once per call: its kind and 3 first numbers name it.
  -- The previous settle's usually matches (a call's settles mostly share their policy):
  -- compared as numbers, without building the name.
  local p = last_policy
  if not (p and p.kind == kind and p.limit == limit and p.period == period and
          p.burst == burst) then
    local id = kind .. string.sub(raw, 1, 24)
    p = record_policies[id]
    if p == nil then
      p = FG.policy(kind, limit, period, burst)
      record_policies[id] = p
    end
    last_policy = p
  end
  -- One table for every settle's reservation: SETTLE reads it and keeps nothing.
  reservation.at, reservation.estimate, reservation.mark = at, estimate, mark
  reservation.deficit = deficit
  reservation.lease = op_lease_record[i]
  -- A key blocked since (docs/algorithms.md, "Blocks") keeps its block: its state is longer
  -- than the algorithm's (gcra's has a ':'). Checked inline: a call costs Redis ~1,000
  -- instructions on every settle.
  local key, size = op_key[i], BLOCK_STATE_SIZE[kind]
  local raw = size and get(key)
  local allowed, remaining, retry, reset
  if raw and (size == 0 and find(raw, ':', 1, true) or size > 0 and #raw ~= size) then
    allowed, remaining, retry, reset =
        beside_block(key, now, kind, SETTLE[kind], key, now, p, reservation, op_cost[i])
  else
    allowed, remaining, retry, reset = SETTLE[kind](key, now, p, reservation, op_cost[i])
  end
  return 1, allowed, p.limit, remaining, retry, reset, 0
end

-- The operations, in order. An acquire and a release are each one call into
-- lua/concurrency.lua (which returns their 7 values), and the clock is set inline, as
-- FG.set_clock does: every function call costs Redis 500 to 1,500 instructions here.
for i = 1, n do
  local now_arg, now = op_now[i], clock
  if now_arg == '' then
    min_ttl_ms = 0
  else
    min_ttl_ms, now = EXPLICIT_NOW_MIN_TTL_MS, tonumber(now_arg)
  end
  local o = 7 * (i - 1)
  local p, lease = op_policy[i], op_lease[i]
  if lease then
    if p then
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7] =
          cc_acquire(op_key[i], now, p, lease)
    else
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7] =
          cc_release(op_key[i], now, lease, op_cost[i])
    end
  else
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7] =
        (op_take[i] and take or p and reserve or settle)(i, now)
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

-- Driver: operating a key (reset, refund, penalize), one operation per call.
--
-- KEYS[1] = the store key (docs/algorithms.md, "Store keys");
-- ARGV = {kind, now, limit, period_us, burst, operation, units} (now: '' = the server clock;
-- operation: 'reset', 'refund' or 'penalize'; units: 0 for a reset, else 1..10^9).
-- Returns {allowed, remaining, retry_after_us, reset_after_us}: the key's peek right after
-- the operation, as lua/single.lua answers (allowed + 2 while the key is blocked).
-- Assembled after common.lua and every algorithm file (the batch's files).
-- The layouts of every driver: src/store/redis/script_layout.h, lua/README.md.
--
-- The same steps as src/core/operate.h (docs/algorithms.md, "Operating a key"), and
-- tests/vectors/operate_*.json checks the two. Each OPERATE[kind](key, now, p, refund,
-- units) writes the key's new state on its algorithm's state without its block (a string
-- state's block is put back around it by beside_block; sliding_log's member scored -inf is
-- stepped over as its decisions step over it), with the TTL its peek gives; a reset is one
-- DEL, the block with it. A penalty goes past the limit no further than a settle's
-- overcharge (FG.MAX_SETTLE_WAIT, core::kMaxSettleWaitUs).
if #KEYS ~= 1 or #ARGV ~= 7 then
  return redis.error_reply('floodgate: expected 1 key and 7 arguments '
                           .. '(kind, now, limit, period_us, burst, operation, units)')
end
local OPERATIONS = {reset = 0, refund = 1, penalize = 1}
local why = FG.check_policy(ARGV[1], ARGV[3], ARGV[4], ARGV[5]) or FG.check_request(ARGV[2], '0')
if not why and OPERATIONS[ARGV[6]] == nil then
  why = 'operation must be reset, refund or penalize'
end
if not why and not FG.parse_int(ARGV[7], OPERATIONS[ARGV[6]], OPERATIONS[ARGV[6]] * FG.MAX_COST) then
  why = 'units must be 0 for a reset, else an integer in [1, 1000000000]'
end
if not why and FG.split_kind(ARGV[1]) == 'cc' then
  why = 'a lease is given back by its release; concurrency keys are not operated on'
end
if why then return redis.error_reply('floodgate: ' .. why) end

local OPERATE = {}

-- A new string state: the key's peek (its own algorithm's, without the block) decides
-- its TTL, as a settle's does (common.lua settle_value). Under delay= the peek is DELAYED's
-- at the caller's now (a state ahead of now is a scheduled charge, as in src/core/operate.h).
local function operated(key, now, p, value)
  known[key] = value
  save(key, value, select(4, (p.delay and DELAYED or DECIDERS)[p.kind](key, now, p, 0)))
end

OPERATE['gcra'] = function(key, now, p, refund, units)
  local emission, tat = p.emission, now
  local raw = get(key)
  if raw then
    local stored = tonumber(raw)
    if stored == nil then corrupt() end
    if stored > now then tat = stored end
  end
  local new
  if refund then  -- max(now, tat - u*E)
    if units > floor((tat - now) / emission) then new = now else new = tat - units * emission end
  else
    local ceiling = now + p.tau + FG.MAX_SETTLE_WAIT
    if units <= floor((ceiling - tat) / emission) then
      new = tat + units * emission
    else
      new = ceiling
    end
  end
  operated(key, now, p, int_string(new))
end

OPERATE['tb'] = function(key, now, p, refund, units)
  local cap = p.burst
  local t0, last, at = tb_load(key, cap, now)
  local tokens = tb_level(cap, p.limit, p.period, t0, last, at, 0)
  if refund then tokens = min(cap, tokens + units) else tokens = max(tb_floor(p), tokens - units) end
  operated(key, p.delay and now or at, p, struct.pack('<dd', tokens, at))
end

OPERATE['tbi'] = function(key, now, p, refund, units)
  local tokens, last, at = tbi_load(key, p, now)
  if refund then
    tokens = min(p.burst, tokens + units)
    if tokens >= p.burst then last = at end  -- a full bucket has no refill phase
  else
    tokens = max(floor(tb_floor(p)), tokens - units)
  end
  operated(key, p.delay and now or at, p, struct.pack('<dd', tokens, last))
end

OPERATE['fw'] = function(key, now, p, refund, units)
  local raw = get(key)
  local stored_w, stored_count
  if raw then stored_w, stored_count = unpack_state('<dI4', raw, 12) end
  local at, w
  if p.cal then
    at, w = calendar_window(now, p.cal, stored_w)
  else
    at, w = window_of(now, p.period, stored_w)
  end
  local count = 0
  if stored_w == w then count = stored_count end
  count = settled_count(p, count, refund and -units or units)
  operated(key, at, p, struct.pack('<dI4', w, count))
end

OPERATE['sw'] = function(key, now, p, refund, units)
  local at, w, cur, prev = sw_load(key, now, p)
  cur = settled_count(p, cur, refund and -units or units)  -- the current window only
  operated(key, at, p, struct.pack('<dI4I4', w, cur, prev))
end

-- The log as a decision sees it (trimmed, time clamped to its newest run); a refund takes
-- the newest units out, whole runs then a split (each step empties a run or ends it); a
-- penalty is a run at now, its key kept P after it and as long as its block.
OPERATE['sl'] = function(key, now, p, refund, units)
  local period, asked = p.period, now
  local newest_time, newest_total, before, count
  now, newest_time, newest_total, before, count = sl_counted(key, now, period, p.delay)
  -- Under delay= (not clamped: see sl_counted) a penalty joins the newest run when that is
  -- ahead, so the log stays in time order.
  if newest_time and newest_time > now then now = newest_time end
  if refund then
    while units > 0 and count > 0 do
      local newest = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
      local back = min(units, select(2, sl_parse(newest[1])))
      sl_resize(key, newest[1], false, newest[2], -back)
      units, count = units - back, count - back
    end
    return
  end
  local blocked_until = BLOCK_LOG['sl'](key, now)
  sl_append(key, now, before, newest_total, units, period,
            max(period + now - asked, blocked_until - asked))
end

local key, p = KEYS[1], FG.policy(ARGV[1], ARGV[3], ARGV[4], ARGV[5])
local now = FG.set_clock(ARGV[2], ARGV[2] == '' and FG.server_now())
local operation, units = ARGV[6], tonumber(ARGV[7])
if operation == 'reset' then
  redis.call('DEL', key)
elseif SORTED_SET[p.kind] then
  OPERATE[p.kind](key, now, p, operation == 'refund', units)
else
  local raw = get(key)
  local state = block_split(p.kind, raw)
  if raw and state ~= raw then  -- blocked (or was): the block stays on what is written
    beside_block(key, now, p.kind, OPERATE[p.kind], key, now, p, operation == 'refund', units)
  else
    OPERATE[p.kind](key, now, p, operation == 'refund', units)
  end
end
return {p.decide(key, now, p, 0)}

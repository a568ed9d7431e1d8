-- Shared helpers of floodgate's Redis scripts, the first part of every loaded script.
--
-- The contract is docs/algorithms.md; src/core is the other definition, and tests/vectors proves
-- the two agree.
--
-- The loaded scripts are plain concatenations, one Lua chunk each:
--   common.lua .. <algorithm>.lua .. single.lua      (one per algorithm; token_bucket.lua
--                                                      serves both 'tb' and 'tbi')
--   common.lua .. gcra.lua .. token_bucket.lua .. sliding_log.lua .. sliding_window.lua
--     .. fixed_window.lua .. concurrency.lua .. batch.lua (or reservation.lua)
-- So everything here is a chunk-level local seen by the files after it, there is no
-- top-level return before the driver's, and the chunk keeps few locals (Lua allows 200).
--
-- Numbers: Lua 5.1 has only doubles, like the C++ `double` steps of docs/algorithms.md, so the
-- arithmetic in the algorithm files follows src/core operation by operation. µs times
-- have 16 digits and tostring() keeps 14, so every number handed to redis.call goes
-- through int_string (exact for integers below 2^53), never a raw Lua number.
--
-- Speed: a batch runs up to 1024 decisions in one call, so what each decision costs in
-- Lua is most of what Redis spends on it beyond GET and SET. The library functions used
-- per decision are chunk-level locals (a global lookup and a table lookup less each
-- time), each call's distinct arguments are parsed once, and each policy's derived
-- constants are computed once per call (PREPARE below).

local format, find, floor, ceil, min, max, tonumber =
    string.format, string.find, math.floor, math.ceil, math.min, math.max, tonumber

-- Each algorithm file registers its decision function here, keyed by the state-kind code
-- (also the key tag, src/core/state_kind.h):
--   DECIDERS[kind] = function(key, now, p, cost)
--     p: the policy, prepared by FG.policy (p.limit, p.period, p.burst and whatever
--        PREPARE[kind] derived from them); returns allowed (1|0), remaining,
--        retry_after_us, reset_after_us (via result). Its writes go through save() (or
--        defer_call() while `deferring`), so that a multi-decision can hold them back
--        (see below); a write no decision can see (a sliding log's trim) may happen at
--        once.
--   RELEASE[kind] = function(key, now, p, cost, at)
--     gives back `cost` units admitted at `at` (a multi-decision's reservation on one
--     Redis Cluster slot that a later slot denied): the key as if they had never been.
-- and may register PREPARE[kind] = function(p) that adds derived constants to p.
local DECIDERS = {}
local RELEASE = {}
local PREPARE = {}
-- Waiting (delay=D; docs/algorithms.md "Waiting", src/core/delay.h): the kinds that take a
-- delay register DELAYED[kind] = function(key, now, p, cost), a DECIDERS[kind] that reads
-- p.delay and answers through `delayed` below.
local DELAYED = {}
-- Reservations (docs/reservations.md; lua/reservation.lua), the same steps as
-- src/core/settle.h:
--   MARK[kind] = function(key, now, p) -> at, mark, deficit: what a reservation just
--     admitted on `key` remembers of it (core::ReservationMark).
--   SETTLE[kind] = function(key, now, p, r, actual) -> the key's peek after charging
--     `actual` instead of r.estimate (r: at, estimate, mark, deficit; the driver refills
--     r for the next settle, so SETTLE reads it and keeps nothing of it). A lease
--     (concurrency) has neither: lua/concurrency.lua's cc_acquire and cc_release.
local MARK = {}
local SETTLE = {}
-- The kinds whose state is a sorted set, not a string (the drivers read strings ahead).
local SORTED_SET = {}

local FG = {}

-- Input ranges: docs/algorithms.md, "Units and inputs" (include/floodgate/policy.h).
FG.MAX_LIMIT = 1000000000
FG.MAX_BURST = 1000000000
FG.MAX_COST = 1000000000
FG.MIN_PERIOD = 1000                      -- 1 ms
FG.MAX_PERIOD = 366 * 86400 * 1000000     -- 366 d
FG.MAX_SLIDING_LOG_LIMIT = 100000
-- How far below empty an overcharge may take a key (core::kMaxSettleWaitUs): 10 years.
FG.MAX_SETTLE_WAIT = 10 * 366 * 86400 * 1000000
-- Every time must be an integer a double holds exactly, or the µs arithmetic (sums and
-- differences of times, which docs/algorithms.md requires exact) would round.
FG.MAX_TIME = 9007199254740991            -- 2^53 - 1

local function int_string(x)
  return format('%d', x)
end

-- A strict decimal integer in [lo, hi], or nil. tonumber alone would take '1e3', '0x10',
-- ' 7' and fractions, none of which the C++ side ever sends.
function FG.parse_int(s, lo, hi)
  if #s == 0 or #s > 16 or not find(s, '^%d+$') then return nil end
  local n = tonumber(s)
  if n < lo or n > hi then return nil end
  return n
end

-- FG.parse_int through `cache` (string -> integer, or false when bad): the drivers see
-- the same few strings over and over, each checked once. One cache per range.
function FG.cached_int(cache, s, lo, hi)
  local v = cache[s]
  if v == nil then
    v = FG.parse_int(s, lo, hi) or false
    cache[s] = v
  end
  return v or nil
end

-- The server clock in µs ("Units and inputs": TIME inside the script, so every
-- application instance agrees). Redis < 5 refuses writes after a non-deterministic
-- command unless the script switches to effects replication first; Redis 7 always
-- replicates effects and keeps the call as a no-op.
function FG.server_now()
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Blocks (docs/algorithms.md, "Blocks"; src/core/block.h): a policy with block=D sends its
-- kind as '<kind>/<D in us>'; one with delay=D (never both) as '<kind>+<D in us>'. Returns
-- the kind, the block and the delay (0: none; nil: a bad D). One find per distinct policy
-- per call is all a policy without either pays.
FG.MAX_DELAY = 3600 * 1000000             -- 1 h
function FG.split_kind(kind)
  local slash = find(kind, '[/+]')
  if not slash then return kind, 0, 0 end
  local d = string.sub(kind, slash + 1)
  if string.byte(kind, slash) == 43 then  -- '+': a delay
    return string.sub(kind, 1, slash - 1), 0, FG.parse_int(d, FG.MIN_PERIOD, FG.MAX_DELAY)
  end
  return string.sub(kind, 1, slash - 1), FG.parse_int(d, FG.MIN_PERIOD, FG.MAX_PERIOD), 0
end

-- The kinds that take a block, with the size of their packed state (gcra's is a decimal
-- string: 0). A blocked state is the algorithm's state (empty when it is fresh) followed
-- by blocked_until: struct.pack('<d', blocked_until) after a packed state, ':' and the
-- decimal blocked_until after gcra's tat. A state without one is as before (absent = 0).
local BLOCK_STATE_SIZE = {gcra = 0, tb = 16, tbi = 16, sw = 16, fw = 12}
-- A kind whose state is a sorted set (sliding_log) keeps blocked_until in that set, where
-- its decider steps over it, and registers how (lua/sliding_log.lua):
--   BLOCK_LOG[kind](key, now) -> blocked_until (0: none; an ended block is dropped)
--   BLOCK_LOG[kind](key, now, blocked_until): saves it, the key's TTL covering it
-- (One function per kind and no helpers beside it: a loaded script makes each of its
-- functions again on every call, whether it runs or not; see lua/sliding_log.lua.)
local BLOCK_LOG = {}

-- Calendar windows (tz=ZONE; docs/algorithms.md, "Calendar windows"): a window
-- algorithm's period argument is then 'c<first>:<s0>:<s1>:<s2>:<s3>:<s4>'
-- (src/store/redis/unit.h CalendarArgument): the ordinal `first` of a window and the
-- starts (µs) of it and the four after it, which the caller computes around its own
-- clock from the zone database Lua does not have. The script still chooses the window
-- by its own clock among them (calendar_window below). Returns {s0, .., s4, first =
-- first}, or nil when malformed.
local CALENDAR_ARGUMENT = '^c(%-?%d+):(%-?%d+):(%-?%d+):(%-?%d+):(%-?%d+):(%-?%d+)$'
local CALENDAR_KINDS = {sw = true, fw = true}
function FG.parse_calendar(period)
  local first, s0, s1, s2, s3, s4 = string.match(period, CALENDAR_ARGUMENT)
  if not first then return nil end
  local cal = {tonumber(s0), tonumber(s1), tonumber(s2), tonumber(s3), tonumber(s4),
               first = tonumber(first)}
  if math.abs(cal.first) > FG.MAX_TIME then return nil end
  for i = 1, 5 do
    if math.abs(cal[i]) > FG.MAX_TIME or (i > 1 and cal[i] < cal[i - 1]) then return nil end
  end
  -- Four windows of at most 366 days each (a zone's year, and a day of 23 to 25 hours).
  if cal[5] - cal[1] > 4 * FG.MAX_PERIOD then return nil end
  return cal
end

-- Checks a policy's arguments (strings, as they arrive in ARGV): kind, limit,
-- period_us, burst. Returns nil when valid, else the reason. Allocates nothing.
function FG.check_policy(kind, limit, period, burst)
  local block, delay
  kind, block, delay = FG.split_kind(kind)
  if not block then return 'block must be an integer count of microseconds in [1ms, 366d]' end
  if block > 0 and BLOCK_STATE_SIZE[kind] == nil and BLOCK_LOG[kind] == nil then
    return 'block is not for this algorithm'
  end
  if not delay then return 'delay must be an integer count of microseconds in [1ms, 1h]' end
  if delay > 0 and DELAYED[kind] == nil then return 'delay is not for this algorithm' end
  if DECIDERS[kind] == nil then return 'unknown algorithm kind' end
  if not FG.parse_int(limit, 1, FG.MAX_LIMIT) then
    return 'limit must be an integer in [1, 1000000000]'
  end
  if string.byte(period, 1) == 99 then  -- 'c': calendar bounds
    if not CALENDAR_KINDS[kind] then return 'calendar windows are for sw and fw only' end
    if not FG.parse_calendar(period) then
      return 'calendar period must be c<first>:<s0>:<s1>:<s2>:<s3>:<s4> with ascending starts'
    end
  elseif not FG.parse_int(period, FG.MIN_PERIOD, FG.MAX_PERIOD) then
    return 'period must be an integer count of microseconds in [1ms, 366d]'
  end
  if not FG.parse_int(burst, 1, FG.MAX_BURST) then
    return 'burst must be an integer in [1, 1000000000]'
  end
  -- The algorithm's own bounds, as Policy::Validate checks them (src/core/policy.cc).
  if kind == 'sl' and tonumber(limit) > FG.MAX_SLIDING_LOG_LIMIT then
    return 'sliding_log limit must be at most 100000'
  end
  if kind == 'cc' and tonumber(limit) > FG.MAX_SLIDING_LOG_LIMIT then
    return 'concurrency holds at most 100000 leases'
  end
  if kind == 'gcra' then
    local l, p = tonumber(limit), tonumber(period)
    if floor((p + l - 1) / l) * l > p + floor(p / 1000) then
      return 'gcra: period / limit rounded up to whole us slows the rate by more than 0.1%'
    end
  end
  return nil
end

-- A checked policy, prepared for its decider: {kind, limit, period, burst, decide, and
-- what PREPARE[kind] derives}.
function FG.policy(kind, limit, period, burst)
  local block, delay
  kind, block, delay = FG.split_kind(kind)
  local p = {kind = kind, limit = tonumber(limit), period = tonumber(period),
             burst = tonumber(burst), decide = DECIDERS[kind], block = block}
  if delay > 0 then p.delay, p.decide = delay, DELAYED[kind] end
  -- A calendar policy has no fixed period: p.cal holds its bounds (FG.parse_calendar).
  if not p.period then p.cal = FG.parse_calendar(period) end
  if block > 0 then
    p.decide_own, p.decide = p.decide, FG.decide_blocked
  end
  if PREPARE[kind] then PREPARE[kind](p) end
  return p
end

-- The p policies a driver's ARGV sends once, from ARGV[2], 4 values each (kind, limit,
-- period_us, burst): checked and prepared, or nil and the error reply naming the first
-- bad one. `argv`: the driver's ARGV when it is not Redis's (lua/node_batch.lua).
function FG.argv_policies(p, argv)
  local ARGV = argv or ARGV
  local policies = {}
  for j = 1, p do
    local at = 4 * j - 2
    local why = FG.check_policy(ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3])
    if why then
      return nil, redis.error_reply(string.format('floodgate: policy %d: %s', j, why))
    end
    policies[j] = FG.policy(ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3])
  end
  return policies
end

-- Checks a decision's own arguments: now ('' = the server clock) and cost.
function FG.check_request(now, cost)
  if now ~= '' and not FG.parse_int(now, 0, FG.MAX_TIME) then
    return 'now must be empty or an integer count of microseconds'
  end
  if not FG.parse_int(cost, 0, FG.MAX_COST) then
    return 'cost must be an integer in [0, 1000000000]'
  end
  return nil
end

-- With an explicit now (replays, tests), TTLs still run on the server's clock, which
-- may move much more slowly or quickly than the caller's; a floor keeps the state until
-- the caller is done with it. Keeping a state past its TTL never changes a decision (a
-- fresh state decides like a missing one), so the floor costs only memory, briefly.
-- The drivers set min_ttl_ms per decision (FG.set_clock).
local EXPLICIT_NOW_MIN_TTL_MS = 60000
local min_ttl_ms = 0

-- The decision time: the server's clock (`now_arg` '', given as `clock`) or the explicit
-- time, which also sets the TTL floor above. lua/reservation.lua's loop writes these
-- steps out, for the reason given at trim_log: change both.
function FG.set_clock(now_arg, clock)
  if now_arg == '' then
    min_ttl_ms = 0
    return clock
  end
  min_ttl_ms = EXPLICIT_NOW_MIN_TTL_MS
  return tonumber(now_arg)
end

-- Milliseconds for PEXPIRE/PX, rounded up so a key never expires before its state is
-- fresh (expiring late is harmless: a fresh state decides like a missing one).
-- (format called directly: int_string around it would be one more Lua call on every
-- write, ~500 Redis instructions: callgrind'd redis-server, a gcra check 39.1k -> 38.6k.)
local function ttl_ms(ttl_us)
  return format('%d', max(ceil(ttl_us / 1000), min_ttl_ms))
end

-- String states read ahead (lua/batch.lua reads a batch's with one MGET: one call into
-- Redis instead of one per decision), kept current by every write below: key -> value,
-- or false when the key has none. A key not in it is read when asked for.
local known = {}

-- A string state (nil-free: false when the key has none).
local function get(key)
  local value = known[key]
  if value == nil then value = redis.call('GET', key) end
  return value
end

-- A multi-decision's group (lua/batch.lua) decides each of its items once, before
-- knowing whether the group is admitted: while `deferring`, the deciders' writes are
-- held here as (key, value, PX milliseconds or false to delete) triples, or (false,
-- function) for a write of another shape, then flushed when the group is admitted or
-- dropped when it is not. The items of a group have distinct keys, so holding a write
-- back changes no other item's decision.
local deferring = false
local deferred, deferred_n = {}, 0

local function defer(key, value, px)
  deferred[deferred_n + 1], deferred[deferred_n + 2], deferred[deferred_n + 3] = key, value, px
  deferred_n = deferred_n + 3
end

-- A write that is not a string state (a sliding log's new run), made at the flush.
local function defer_call(write)
  defer(false, write, false)
end

-- Saves a string state with a TTL of ttl_us (docs/algorithms.md, "Store keys": every key has
-- a TTL). ttl_us <= 0 means the saved state would be the fresh one, so the key goes.
local function save(key, value, ttl_us)
  if deferring then
    defer(key, value, ttl_us > 0 and ttl_ms(ttl_us))
  elseif ttl_us <= 0 then
    redis.call('DEL', key)
    known[key] = false
  else
    redis.call('SET', key, value, 'PX', ttl_ms(ttl_us))
    known[key] = value
  end
end

-- Makes the held writes, in the order they were made.
local function flush_deferred()
  for k = 1, deferred_n, 3 do
    local key, value, px = deferred[k], deferred[k + 1], deferred[k + 2]
    if not key then
      value()
    elseif px then
      redis.call('SET', key, value, 'PX', px)
      known[key] = value
    else
      redis.call('DEL', key)
      known[key] = false
    end
  end
  deferred_n = 0
end

-- Raises an error reply for a stored state this script cannot read. The key is left out
-- of the message: keys are binary and may hold CR/LF.
local function corrupt()
  error(redis.error_reply('floodgate: unreadable stored state (not written by these scripts)'))
end

-- A string state split from its block (BLOCK_STATE_SIZE above): the algorithm's state
-- (false: none) and blocked_until (0: none).
local function block_split(kind, raw)
  if not raw then return false, 0 end
  local size = BLOCK_STATE_SIZE[kind]
  if size == 0 then
    local colon = find(raw, ':', 1, true)
    if not colon then return raw, 0 end
    local until_ = tonumber(string.sub(raw, colon + 1))
    if until_ == nil then corrupt() end
    return colon > 1 and string.sub(raw, 1, colon - 1), until_
  end
  if #raw == size then return raw, 0 end
  if #raw ~= size + 8 and #raw ~= 8 then corrupt() end
  return #raw > 8 and string.sub(raw, 1, size), (struct.unpack('<d', string.sub(raw, -8)))
end

local function block_join(kind, state, until_)
  if BLOCK_STATE_SIZE[kind] == 0 then return (state or '') .. ':' .. int_string(until_) end
  return (state or '') .. struct.pack('<d', until_)
end

-- p.decide of a policy with block=D: src/core/block.h DecideWithBlock, step by step. The
-- algorithm decides on its own state (known[key] holds it meanwhile) with its writes held
-- back; they are made only when it decided unblocked. Answers allowed as 0|1, plus 2 when
-- the key is blocked after the decision (src/store/redis/decode.cc).
function FG.decide_blocked(key, now, p, cost)
  local log = BLOCK_LOG[p.kind]
  local raw, state, until_
  if log then
    until_ = log(key, now)  -- the decider reads its set itself
  else
    raw = get(key)
    state, until_ = block_split(p.kind, raw)
    known[key] = state
  end
  local mark, was = deferred_n, deferring
  deferring = true
  local allowed, remaining, retry, reset = p.decide_own(key, now, p, cost)
  if now < until_ then
    if cost > 0 and allowed == 1 then  -- nothing is charged: the state's own reset
      retry, reset = 0, select(4, p.decide_own(key, now, p, 0))
    end
    deferred_n, deferring = mark, was
    if not log then known[key] = raw end
    local left = until_ - now
    if reset < left then reset = left end
    if cost == 0 then return 3, 0, 0, reset end
    if retry ~= -1 and retry < left then retry = left end
    return 2, 0, retry, reset
  end
  if allowed == 0 and cost > 0 and retry >= 0 then
    -- The denial starts a block: its one write, made whatever a multi-decision does.
    deferred_n, deferring = mark, was
    local block = p.block
    if log then
      log(key, now, now + block)
    else
      local value = block_join(p.kind, state, now + block)
      redis.call('SET', key, value, 'PX', ttl_ms(max(block, reset)))
      known[key] = value
    end
    return 2, 0, max(block, retry), max(block, reset)
  end
  deferring = was
  if not log then known[key] = raw end
  if not was then flush_deferred() end
  return allowed, remaining, retry, reset
end

-- fn(...) (a settle, a release: writes of another decision's charge) on the key's state
-- without its block, which stays on whatever fn writes while it lasts.
local function beside_block(key, now, kind, fn, ...)
  local raw = get(key)
  local state, until_ = block_split(kind, raw)
  if until_ == 0 then
    -- A suffix that parses as 0 is none of ours (block_join writes now + D): fn would
    -- meet the same string and come back here, for ever.
    if raw and state ~= raw then corrupt() end
    return fn(...)
  end
  local mark, was = deferred_n, deferring
  known[key], deferring = state, true
  local a, b, c, d = fn(...)
  known[key], deferring = raw, was
  if until_ > now then
    local left = ceil((until_ - now) / 1000)
    for k = mark + 1, deferred_n, 3 do
      if deferred[k] == key then
        local px = deferred[k + 2]
        deferred[k + 1] = block_join(kind, px and deferred[k + 1], until_)
        deferred[k + 2] = format('%d', max(px and tonumber(px) or 0, left, min_ttl_ms))
      end
    end
  end
  if not was then flush_deferred() end
  return a, b, c, d
end

-- Sets the TTL of a key written in place (the sliding log's sorted set); same rule.
local function expire(key, ttl_us)
  if ttl_us <= 0 then
    redis.call('DEL', key)
  else
    redis.call('PEXPIRE', key, ttl_ms(ttl_us))
  end
end

-- struct.unpack of a packed state, checking its size first (a short string would make
-- struct read past it; a long one is not ours). A state with a block after it (block_join)
-- read by a policy without block= (a rule that dropped the option while the key was
-- blocked; the deciders step over the block with beside_block, the other readers here)
-- is the state before the block.
local function unpack_state(fmt, raw, size)
  if #raw ~= size then
    if #raw ~= size + 8 then corrupt() end
    raw = string.sub(raw, 1, size)
  end
  return struct.unpack(fmt, raw)
end

-- The decision as returned to the caller, as src/core/arith.h SetDecision writes it:
-- remaining clamped to >= 0, retry_after_us 0 when allowed. Four values, not a table:
-- a batch copies them straight into its reply without a table per decision.
local function result(allowed, remaining, retry_after_us, reset_after_us)
  if remaining < 0 then remaining = 0 end
  if allowed then return 1, remaining, 0, reset_after_us end
  return 0, remaining, retry_after_us, reset_after_us
end

-- The answer of a DELAYED decider: allowed + 4 (src/store/redis/decode.cc), and when
-- allowed its delay_us where the retry goes (an admission has no retry).
local function delayed(allowed, remaining, retry_or_delay_us, reset_after_us)
  if remaining < 0 then remaining = 0 end
  if allowed then return 5, remaining, retry_or_delay_us, reset_after_us end
  return 4, remaining, retry_or_delay_us, reset_after_us
end

-- The window index of `now` for the window algorithms (src/core/windows.h
-- ClampedWindow): w = floor(now / P), and when the stored window is later (time went
-- backwards) the decision happens at the start of the stored window instead, so waits
-- are never negative. Returns the (possibly clamped) now and w.
local function window_of(now, period, stored_window)
  local w = floor(now / period)
  if stored_window and stored_window > w then
    w = stored_window
    now = w * period
  end
  return now, w
end

-- window_of for a calendar policy (p.cal, FG.parse_calendar): the window holding `now`
-- among the caller's bounds, clamped as window_of clamps. Returns now, w, start(w),
-- end(w) and end(w+1) (src/core/windows.h WindowSpanAt). A clock outside the bounds (the
-- caller's and the server's clocks more than a window apart, or time going back more
-- than a window) is an error: deciding in a window whose bounds are unknown would guess.
local function calendar_window(now, cal, stored_window)
  local i
  for k = 1, 3 do
    if cal[k] <= now and now < cal[k + 1] then
      i = k
      break
    end
  end
  if i and stored_window and stored_window > cal.first + i - 1 then
    i = stored_window - cal.first + 1
    if i > 3 then i = nil else now = cal[i] end
  end
  if not i then
    error(redis.error_reply('floodgate: the decision time is outside the calendar windows '
                            .. 'the caller sent (its clock and the server\'s differ by '
                            .. 'more than a window?)'))
  end
  return now, cal.first + i - 1, cal[i], cal[i + 1], cal[i + 2]
end

-- The calendar window holding `at` among a policy's bounds (a release's admission time),
-- with its end and the next window's end where known; nil when `at` is before them, so
-- older than any window a decision at the caller's clock still counts.
local function calendar_window_of(at, cal)
  for k = 1, 4 do
    if cal[k] <= at and at < cal[k + 1] then return cal.first + k - 1, cal[k + 1], cal[k + 2] end
  end
  return nil
end

-- A sorted-set log (sliding_log's runs, concurrency's leases) before a decision: its
-- newest member ({member, score}, empty when none) and that score, now clamped to it
-- (time going backwards decides at the newest entry, so entries stay in time order and
-- waits are never negative), and the entries at or before now - P dropped (an entry P
-- old no longer counts; removing the last one deletes the key). A member scored -inf is
-- no entry (sliding_log's block, lua/sliding_log.lua): the exclusive bound '(-inf' keeps
-- it, at no cost to a key without one. Returns now, newest,
-- newest_time. A key with no newest entry has none at all: nothing to drop, and no call
-- (a fresh key, or one its last lease has just left, is most keys). lua/concurrency.lua's
-- cc_acquire and cc_release write these steps out, with cc_held's count and the peek:
-- calling the helpers (this one, cc_held, cc_reset, result, ttl_ms, and FG.set_clock in
-- the driver) cost Redis 91.3k instructions per acquire + release against 84.0k written
-- out (callgrind'd redis-server). Change them together; the lease vectors
-- (tests/vectors/reserve/leases.json) check them on Redis and Cluster.
local function trim_log(key, now, period, scheduled)
  local newest = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
  local newest_time = tonumber(newest[2])
  if newest_time then
    if newest_time > now and not scheduled then now = newest_time end
    redis.call('ZREMRANGEBYSCORE', key, '(-inf', int_string(now - period))
  end
  return now, newest, newest_time
end

-- A settled value state (false: unchanged): the key's peek is decided on it, and it is
-- saved with the TTL that peek gives (core::Settle's ttl_us = the peek's reset).
local function settle_value(key, now, p, value)
  if value then known[key] = value end
  local allowed, remaining, retry, reset = p.decide(key, now, p, 0)
  if value then save(key, value, reset) end
  return allowed, remaining, retry, reset
end

-- A window count after a settle: within 0 .. L + MAX_COST (core::SettledCount).
local function settled_count(p, count, delta)
  return min(max(count + delta, 0), p.limit + FG.MAX_COST)
end


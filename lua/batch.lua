-- Driver: a batch of decisions in one call, in order, multi-decision groups decided together.
--
-- n decisions, each exactly as if it ran alone (a later decision on the same key sees the earlier
-- one's write), except the groups, whose items are decided together (docs/multi.md). KEYS[i] = the
-- key of decision i. The decisions of a batch usually share their policy, so policies are sent
-- once:
--   ARGV = {p, then p policies of 4 values: kind, limit, period_us, burst
--           g, then g listed groups of 5 values: first, count, mode, shadow mask, at
--             (first: the group's first item, count: its items)
--           then 3 values per decision: policy, now, cost
--             (policy: its policy's number 1..p; now: '' = the server clock)}
-- A group's mode: 'all' (all or nothing: consumed only if every enforced item with cost
-- > 0 allows, under delay= at their common start: wait_group below; bit j-1 of the
-- shadow mask marks item j of the group as a shadow that never denies), 'dry' (each
-- item decided, nothing consumed) or 'release' (each item's cost, admitted at `at`, given
-- back). The common group, 'all' without shadows, is not
-- listed: its items after the first carry their policy number as '+j', joining the
-- previous item's group (a listed group's items never do). Items a group does not
-- consume report their peek, denials their denial. Returns a flat array of 4*n
-- integers, per decision: allowed, remaining, retry_after_us, reset_after_us (allowed:
-- 1|0), then the server clock it read (0: none). The layouts of every driver:
-- src/store/redis/script_layout.h, lua/README.md.
-- Every argument is checked before any decision runs, so bad input never applies half
-- a batch. TIME is read at most once, so all clock-timed decisions share one now.
local p = FG.parse_int(ARGV[1] or '', 1, 1024)
local g = p and FG.parse_int(ARGV[2 + 4 * p] or '', 0, #KEYS)
if not g or #ARGV ~= 2 + 4 * p + 5 * g + 3 * #KEYS then
  return redis.error_reply('floodgate: expected ARGV = {p, p x (kind, limit, period_us, '
                           .. 'burst), g, g x (first, count, mode, shadow mask, at), '
                           .. 'n x (policy, now, cost)}')
end
local policies, bad_policy = FG.argv_policies(p, ARGV)
if not policies then return bad_policy end
-- Groups, by their first item, in flat arrays (no table per group); they may not
-- overlap. Counts and masks repeat from group to group: each distinct string is checked
-- once.
local group_count, group_mode, group_mask, group_at = {}, {}, {}, {}
local count_of, mask_of = {}, {}
local grouped = 0  -- the last item of the previous group
for k = 1, g do
  local at = 3 + 4 * p + 5 * (k - 1)
  local first = FG.parse_int(ARGV[at], 1, #KEYS)
  local count = FG.cached_int(count_of, ARGV[at + 1], 1, 16)
  local mask = FG.cached_int(mask_of, ARGV[at + 3], 0, 65535)
  local mode = ARGV[at + 2]
  local release_at = ARGV[at + 4] ~= '' and FG.parse_int(ARGV[at + 4], 0, FG.MAX_TIME)
  local why
  if not first or not count or first <= grouped or first + count - 1 > #KEYS then
    why = 'items out of range or overlapping another group'
  elseif mode ~= 'all' and mode ~= 'dry' and mode ~= 'release' then
    why = 'mode must be all, dry or release'
  elseif not mask then
    why = 'shadow mask must be an integer in [0, 65535]'
  elseif (mode == 'release') ~= (release_at ~= false) then
    why = 'at is the release time, given for release groups only'
  end
  if why then return redis.error_reply(string.format('floodgate: group %d: %s', k, why)) end
  group_count[first], group_mode[first], group_mask[first], group_at[first] =
      count, mode, mask, release_at
  grouped = first + count - 1
end
-- A batch repeats the same few strings (policy numbers, costs, an empty now): each
-- distinct one is checked and converted once, and the decisions below reuse the numbers.
local policy_of, cost_of, joins = {}, {}, {}
local first = 3 + 4 * p + 5 * g  -- the first decision's policy number
local needs_clock = false
local unit = 0          -- the first item of the previous item's unit (0: it cannot be joined)
local listed_until = 0  -- the last item of the listed group the scan is in
for i = 1, #KEYS do
  local at = first + 3 * (i - 1)
  local number, now, cost = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  local why
  if policy_of[number] == nil then
    local join = string.byte(number) == 43  -- '+'
    local j = FG.parse_int(join and string.sub(number, 2) or number, 1, p)
    if j then
      policy_of[number], joins[number] = policies[j], join
    else
      why = 'policy number out of range'
    end
  end
  if not why then
    if group_count[i] and i > listed_until then listed_until = i + group_count[i] - 1 end
    if joins[number] then  -- the unit becomes (or grows) an unlisted 'all' group
      local count = (group_count[unit] or 1) + 1
      if unit == 0 or i <= listed_until then
        why = "'+' joins the previous item's group: none to join, or the item is listed"
      elseif count > 16 then
        why = 'a group takes at most 16 items'
      else
        group_count[unit], group_mode[unit], group_mask[unit] = count, 'all', 0
      end
    else
      unit = i > listed_until and i or 0
    end
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

-- Every string state the batch decides on, read with one MGET (a sliding log is a sorted
-- set, read as it is decided). Chunks bound the Lua C stack unpack() uses.
do
  local batch = {}
  local function read()
    local values = redis.call('MGET', unpack(batch))
    for k = 1, #batch do known[batch[k]] = values[k] end
    batch = {}
  end
  for i = 1, #KEYS do
    -- A key read already (lua/node_batch.lua reads every key) is not read again.
    if known[KEYS[i]] == nil and not SORTED_SET[policy_of[ARGV[first + 3 * (i - 1)]].kind] then
      batch[#batch + 1] = KEYS[i]
      if #batch == 1000 then read() end
    end
  end
  if #batch > 0 then read() end
end

-- Decides item i with `cost` into the reply's slot i (its writes held back while
-- `deferring`).
local function decide(i, cost)
  local at = first + 3 * (i - 1)
  local policy = policy_of[ARGV[at]]
  local o = 4 * (i - 1)
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] =
      policy.decide(KEYS[i], FG.set_clock(ARGV[at + 1], clock), policy, cost)
end

-- Whether item i of the group starting at `from` is enforced (bit i - from of the mask clear).
local function enforced(mask, from, i)
  return mask == 0 or floor(mask / 2 ^ (i - from)) % 2 == 0
end

-- s_i - now of item i from its own decision in the reply (src/core/multi.cc OwnWait): 0
-- admitted at once, its delay when admitted later (allowed + 4: the delay is in the retry
-- field), retry_after + D when denied, -1 when it never fits.
local function own_wait(i, policy)
  local ok, retry = out[4 * i - 3], out[4 * i - 1]
  if ok % 2 == 1 then
    if ok >= 4 then return retry end
    return 0
  end
  if retry < 0 then return -1 end
  return retry + (policy.delay or 0)
end

-- docs/algorithms.md, "Waiting", multi-decisions; the same steps as src/core/multi.cc
-- (StartOf, Redecide). Each item was decided on its own (writes held back); s = the latest
-- start s_i of the items that schedule (enforced, cost > 0), the allowance min D_i (0
-- without delay=). Admitted at once: those decisions stand. Admitted with s > now: each
-- item that schedules is charged again as a decision at s (DELAYED's window {s, allowance}),
-- the others decided as on their own. Denied: nothing is charged; an item that schedules
-- and cannot start within the allowance answers its denial by it ({now, allowance}), every
-- other item its peek or its own denial.
local function wait_group(from, last, mask)
  local wait, allowance = 0, nil
  for i = from, last do
    local at = first + 3 * (i - 1)
    local policy = policy_of[ARGV[at]]
    if cost_of[ARGV[at + 2]] > 0 and enforced(mask, from, i) then
      local own = own_wait(i, policy)
      if own < 0 or wait < 0 then wait = -1 elseif own > wait then wait = own end
      local d = policy.delay or 0
      if allowance == nil or d < allowance then allowance = d end
    end
  end
  if wait == 0 then  -- every item admitted at once: their decisions and writes stand
    flush_deferred()
    return
  end
  deferred_n = 0
  local admits = wait > 0 and wait <= allowance
  for i = from, last do
    local at, o = first + 3 * (i - 1), 4 * (i - 1)
    local policy, cost = policy_of[ARGV[at]], cost_of[ARGV[at + 2]]
    local now = FG.set_clock(ARGV[at + 1], clock)
    local schedules = cost > 0 and enforced(mask, from, i)
    if admits then
      if schedules then
        out[o + 1], out[o + 2], out[o + 3], out[o + 4] =
            policy.decide(KEYS[i], now, policy, cost, now + wait, allowance)
      else
        decide(i, cost)
      end
    else
      local own = own_wait(i, policy)
      deferring = true  -- a denied request writes nothing
      if schedules and policy.delay and (own < 0 or own > allowance) then
        out[o + 1], out[o + 2], out[o + 3], out[o + 4] =
            policy.decide(KEYS[i], now, policy, cost, now, allowance)
      elseif out[o + 1] % 2 == 1 and cost > 0 then
        decide(i, 0)
      end
      deferring, deferred_n = false, 0
    end
  end
end

-- docs/multi.md, "Decision": every item decided once, its writes held back; made only if
-- every enforced item with cost > 0 allows, else dropped, and each item that allowed
-- reports its peek instead. A 'dry' group is never admitted; a 'release' group gives its
-- items back, then reports their peeks.
local function decide_group(from)
  local last, mode = from + group_count[from] - 1, group_mode[from]
  if mode == 'release' then
    for i = from, last do
      local at = first + 3 * (i - 1)
      local policy = policy_of[ARGV[at]]
      local now = FG.set_clock(ARGV[at + 1], clock)
      -- A string state may carry a block even under a policy without block= (a rule that
      -- dropped the option): it stays. A log's RELEASE keeps its block itself.
      if BLOCK_STATE_SIZE[policy.kind] then
        beside_block(KEYS[i], now, policy.kind, RELEASE[policy.kind], KEYS[i], now, policy,
                     cost_of[ARGV[at + 2]], group_at[from])
      else
        RELEASE[policy.kind](KEYS[i], now, policy, cost_of[ARGV[at + 2]], group_at[from])
      end
    end
    deferring = true
    for i = from, last do decide(i, 0) end
    deferring = false
    deferred_n = 0
    return
  end
  local mask = group_mask[from]
  local allowed = mode == 'all'
  local waits = false  -- an enforced item with cost > 0 has delay=: wait_group decides
  deferring = true  -- from here on, peeks and refused items write nothing
  for i = from, last do
    -- decide(i, cost), written out: every item of every group comes this way.
    local at = first + 3 * (i - 1)
    local policy = policy_of[ARGV[at]]
    local now_arg = ARGV[at + 1]
    local now = clock
    if now_arg == '' then min_ttl_ms = 0 else now = FG.set_clock(now_arg, clock) end
    local cost = cost_of[ARGV[at + 2]]
    local o = 4 * (i - 1)
    local ok
    ok, out[o + 2], out[o + 3], out[o + 4] = policy.decide(KEYS[i], now, policy, cost)
    out[o + 1] = ok
    if cost > 0 and enforced(mask, from, i) then
      if ok % 2 == 0 then allowed = false end
      if policy.delay then waits = true end
    end
  end
  deferring = false
  if waits and mode == 'all' then return wait_group(from, last, mask) end
  if allowed then
    flush_deferred()
    return
  end
  deferred_n = 0
  deferring = true
  for i = from, last do
    if out[4 * i - 3] % 2 == 1 and cost_of[ARGV[first + 3 * (i - 1) + 2]] > 0 then decide(i, 0) end
  end
  deferring, deferred_n = false, 0
end

local i, n = 1, #KEYS
while i <= n do
  local count = group_count[i]
  if count then
    decide_group(i)
    i = i + count
  else
    -- decide(i, cost, false), written out: most decisions come this way, at the clock.
    local at = first + 3 * (i - 1)
    local policy = policy_of[ARGV[at]]
    local now_arg = ARGV[at + 1]
    local now = clock
    if now_arg == '' then min_ttl_ms = 0 else now = FG.set_clock(now_arg, clock) end
    local o = 4 * (i - 1)
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] =
        policy.decide(KEYS[i], now, policy, cost_of[ARGV[at + 2]])
    i = i + 1
  end
end
out[#out + 1] = clock or 0
return out

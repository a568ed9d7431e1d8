-- Layout: lua/batch.lua's decisions on keys of several slots of one Redis Cluster node.
--
-- A cluster routes a call by its declared keys and refuses declared keys of several slots
-- (CROSSSLOT); a script flagged allow-cross-slot-keys (the shebang this script opens with)
-- may still use keys of every slot its node serves. So KEYS[1], the first decision's key,
-- routes the call and the other keys lead ARGV:
--   ARGV = {n, slot marks, keys 2..n, then lua/batch.lua's ARGV for the n decisions}
-- where the slot marks are n characters, '1' where a key's slot differs from the previous
-- key's (the keys of a slot are adjacent) and '0' elsewhere.
-- Every key is read before anything is written (one MGET per slot: a command's keys must
-- still share a slot): a key the node no longer serves (moved, or migrating and absent)
-- fails the call with "Script attempted to access a non local key" and nothing written,
-- and the caller sends those decisions again slot by slot.
local n = FG.parse_int(ARGV[1] or '', 1, 1000000)
if #KEYS ~= 1 or not n or #ARGV < n + 1 or #ARGV[2] ~= n or string.byte(ARGV[2], 1) ~= 49 then
  return redis.error_reply('floodgate: expected KEYS = {first key}, ARGV = {n, slot marks, '
                           .. 'keys 2..n, the batch arguments}')
end
local node_keys, node_argv = {KEYS[1]}, {}
for i = 2, n do node_keys[i] = ARGV[i + 1] end
for i = n + 2, #ARGV do node_argv[i - n - 1] = ARGV[i] end
do
  -- A sorted set reads as nil (false): only string states are read through `known`, and
  -- a key's tag names its kind, so no string state shares a sorted set's key.
  local marks, from = ARGV[2], 1
  for i = 2, n + 1 do
    if i > n or string.byte(marks, i) == 49 or i - from == 1000 then
      local values = redis.call('MGET', unpack(node_keys, from, i - 1))
      for k = from, i - 1 do known[node_keys[k]] = values[k - from + 1] end
      from = i
    end
  end
end
-- lua/batch.lua decides on these as on declared keys and its own ARGV.
local KEYS, ARGV = node_keys, node_argv

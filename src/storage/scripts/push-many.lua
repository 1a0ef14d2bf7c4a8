--[[
  Stores several pushes in one call (group commit, see storage/committer.ts): each as push.lua
  stores it, in the order sent, each with its own outcome. A push that push.lua refuses (a key of
  the wrong type among them, checked before its first write or its ids taken back) or that Redis refuses (an error of
  one of its commands, OOM) wrote nothing, as push.lua writes its ids before anything else, and
  leaves the others as they went.

  KEYS    each push's own KEYS of push.lua, `keysPerPush` each, pushes in order
  ARGV[1] n, the number of pushes
  ARGV[2] keysPerPush: 2 on a standalone Redis (the key's base, its index), 1 on a Cluster (the
          base: every push of a call is of one slot)
  ARGV[3 .. n+2] each push's ARGV count
  ARGV[rest..] each push's own ARGV of push.lua (built from args.ts `push`), pushes in order

  Returns one reply per push, in order: push.lua's reply (a refusal, or {covered, waitMs, added}),
  or the error reply Redis gave that push.
]]
--- @include "script-push"
local n, keysPerPush = tonumber(ARGV[1]), tonumber(ARGV[2])
local replies = {}
local at = n + 2
for i = 1, n do
  local keys, args = {}, {}
  for k = 1, keysPerPush do keys[k] = KEYS[(i - 1) * keysPerPush + k] end
  for j = 1, tonumber(ARGV[2 + i]) do args[j] = ARGV[at + j] end
  at = at + #args
  local ok, reply = pcall(pushScript, keys, args)
  -- An error of redis.call is a table with `err`; one of the script's own code, a string.
  if not ok then reply = type(reply) == 'table' and reply or redis.error_reply(tostring(reply)) end
  replies[i] = reply
end
return replies

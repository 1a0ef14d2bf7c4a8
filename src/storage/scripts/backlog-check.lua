--[[
  Whether a push would take its key past maxPendingPerKey, judged as push.lua judges it
  (includes/backlog.lua), without writing. Where a push writes the key's index entry before its
  script call (a Redis Cluster, where the index lives in another slot), this call goes first, so
  that a push refused for its key's backlog writes no index entry either; push.lua judges again,
  atomically with its write, and refuses a push that concurrent pushes filled the key for
  meanwhile (those pushes wrote the key's index entry themselves).

  KEYS[1] the key's base name (see includes/keyspace, keys.ts)
  ARGV    by name, generated from storage/scripts/args.ts (`backlog-check`):
    store       'list' | 'set' | 'zset'
    maxPending  the key's maxPendingPerKey (> 0)
    high        the push has priority 'high' (see includes/priority.lua)
  ARGV[rest..] the push's ids

  Returns {REPLY.backlogFull, pending, adding} when the push would not fit: the key's pending
  count and how many ids the push would add; {REPLY.ok} when it fits.
]]
--- @include "keyspace"
--- @include "backlog"
local K = keyNames(KEYS[1], 0)
--- @include "args-backlog-check"
local pending, adding = backlogOver(arg_store, K, arg_high, arg_maxPending, ARGV, arg_rest, #ARGV)
if pending then return {REPLY.backlogFull, pending, adding} end
return {REPLY.ok}

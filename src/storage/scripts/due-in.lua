--[[
  How long a key's delayed job should wait before it has something to claim, judged as the
  claim would: a due failed slice, or pending ids of either level (a zset's when ready; see
  includes/priority.lua) unless the key is
  blocked by too many failed slices backing off (see includes/claim-key.lua).
  A paused or held key has nothing due before its pause or hold ends; pending ids wait to fill
  (see includes/fill.lua).

  KEYS[1] the key's base name: every name of the key is derived from it (see keys.ts)
  ARGV    by name, generated from storage/scripts/args.ts (`due-in`):
    store    'list' | 'set' | 'zset'
    fillMin, fillMaxWaitMs  wait to fill: the key's minSliceSize (1: no wait) and maxWaitMs (see
             includes/fill.lua); either absent: no wait

  Returns ms until something is due (0: now); -1 when nothing is pending or backing off, or the
  key is paused until resumed.
]]
--- @include "keyspace"
--- @include "clock"
--- @include "flow"
--- @include "due"
--- @include "fill"
--- @include "priority"
--- @include "args-due-in"
local A = dueInArgs()
local K = keyNames(KEYS[1], 0)
local retrying = redis.call('ZCARD', K.retry)
local blocked = retrying >= MAX_RETRYING_SLICES
local filling = blocked and 0 or fillWait(A.store, K, A.fillMin or 1, A.fillMaxWaitMs or 0)
local due = withHighDue(A.store, K, filledDueAt(A.store, K, filling, blocked, retrying), blocked, redis.call('EXISTS', K.extras) == 0)
if not due then return -1 end
local held = heldFor(K.paused, K.hold)
if held == -1 then return -1 end
return math.max(0, due - clockMs(), held or 0)

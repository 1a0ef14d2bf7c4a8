--[[
  How long a key's delayed job should wait before it has something to claim, judged as the
  claim would: a due failed slice, or pending ids (a zset's when ready) unless the key is
  blocked by too many failed slices backing off (see includes/claim-key.lua).

  A paused or held key has nothing due before its pause or hold ends.

  KEYS[1] pending ids    KEYS[2] retry (failed slices, scored by when they are due)
  KEYS[3] paused (by an operator)   KEYS[4] hold (a rate limit, a retryAfter)
  ARGV[1] store: 'list' | 'set' | 'zset'
  ARGV[2] failed slices backing off that block new claims

  Returns ms until something is due (0: now); -1 when nothing is pending or backing off, or the
  key is paused until resumed.
]]
--- @include "clock"
--- @include "flow"
--- @include "due"
local retrying = redis.call('ZCARD', KEYS[2])
local due = dueAt(ARGV[1], KEYS[1], KEYS[2], retrying >= tonumber(ARGV[2]), retrying)
if not due then return -1 end
local held = heldFor(KEYS[3], KEYS[4])
if held == -1 then return -1 end
return math.max(0, due - clockMs(), held or 0)

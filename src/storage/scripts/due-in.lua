--[[
  How long a key's delayed job should wait before it has something to claim, judged as the
  claim would: a due failed slice, or pending ids (a zset's when ready) unless the key is
  blocked by too many failed slices backing off (see includes/claim-body.lua).

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
local now = clockMs()
local due
local retry = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]
if retry then due = tonumber(retry) end
if redis.call('ZCARD', KEYS[2]) < tonumber(ARGV[2]) then
  if ARGV[1] == 'zset' then
    local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
    if first and (not due or tonumber(first) < due) then due = tonumber(first) end
  elseif redis.call(ARGV[1] == 'list' and 'LLEN' or 'SCARD', KEYS[1]) > 0 then
    due = now
  end
end
if not due then return -1 end
local held = heldFor(KEYS[3], KEYS[4])
if held == -1 then return -1 end
return math.max(0, due - now, held or 0)

--[[
  The end of a run under the batcher-wide limits (see engine/global-limits.ts): gives back its
  lanes' places under the concurrency cap and settles its lanes' last reservations of the rate
  window, in one call. Not fenced by the key's lock: a lease is the run's own by its member.

  KEYS    the batcher's limit names, in `limitKeys` order (see includes/global-limits.lua)
  ARGV    by name, generated from storage/scripts/args.ts (`limits-leave`):
    cap            globalConcurrency (0: none)
    rateMax, rateWindowMs  globalRateLimit (0: none)
    need           what a pass reserves (sliceSize): the rate window wakes one waiter per `need` ids of room
    settle         the reservations to settle, `at count` pairs space-separated ('' for none;
                   see limits-enter.lua settleAt and settleCount)
  ARGV[rest..] the leases to give back

  Returns the waiters to wake: one per place free, then one per `need` ids of room in the window.
]]
--- @include "args-limits-leave"
--- @include "global-limits"
local A = limitsLeaveArgs()
local L = limitNames()
for at, n in string.gmatch(A.settle, '(%d+) (%-?%d+)') do
  rateSettle(L, tonumber(at), tonumber(n), A.rateWindowMs)
end
local leases = {unpack(ARGV, A.rest)}
if #leases > 0 then redis.call('ZREM', L.leases, unpack(leases)) end
dropLapsed(L, clockMs())
local wake = toWake(L, A.cap)
for _, waiter in ipairs(rateToWake(L, A.rateMax, A.need)) do wake[#wake + 1] = waiter end
return wake

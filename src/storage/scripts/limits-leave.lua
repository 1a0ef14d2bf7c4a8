--[[
  The end of a run under the batcher-wide limits (see engine/global-limits.ts): gives back its
  lanes' places under the concurrency cap and settles its lanes' last reservations of the rate
  window, in one call. Not fenced by the key's lock: a lease is the run's own by its member.

  KEYS    the batcher's limit names, in `limitKeys` order (see includes/global-limits.lua)
  ARGV    by name, generated from storage/scripts/args.ts (`limits-leave`):
    cap            globalConcurrency (0: none)
    rateWindowMs   globalRateLimit's window (0: none)
    settle         the reservations to settle, `at count` pairs space-separated ('' for none;
                   see limits-enter.lua settleAt and settleCount)
  ARGV[rest..] the leases to give back

  Returns the waiters to wake, one per place free.
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
return toWake(L, A.cap)

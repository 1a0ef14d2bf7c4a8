--[[
  A slice that starts late (see engine/key-run.ts `onTime`): its ids, reserved from the shared
  rate window at `at`, start later than the window's margin for the delay from reservation to
  handler start allows (a busy event loop held the pass's reply, or the claim's). Counted at
  `at`, they could start in one window with ids reserved just after theirs expired. So they are
  given back at `at` and spent again now, when the window has room for them; otherwise they stay
  given back (the slice has not started: it counts nowhere) and the lane waits and asks again.

  KEYS    the batcher's limit names, in `limitKeys` order (see includes/global-limits.lua)
  ARGV[1] at          when the ids were reserved (0: they are counted nowhere now)
  ARGV[2] n           how many ids the slice holds
  ARGV[3] rateMax     globalRateLimit's max
  ARGV[4] rateWindowMs the window enforced (with its margin)

  Returns {stamp, waitMs}: the ids' new stamp (0: not spent), and when not, ms until the window
  may have room for them.
]]
--- @include "global-limits"
local L = limitNames()
local at, n, rateMax, windowMs = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if at > 0 then rateSettle(L, at, n, windowMs) end
-- A slice larger than the limit (a failed slice run again whole) spends once the window is empty.
local allowance, wait = rateAllowance(L.rateLog, L.rateUsed, rateMax, windowMs, math.min(n, rateMax))
if allowance < math.min(n, rateMax) then return {0, math.max(1, wait)} end
rateSpend(L.rateLog, L.rateUsed, n, windowMs)
return {clockMs(), 0}

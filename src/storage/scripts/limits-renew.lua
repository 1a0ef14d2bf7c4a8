--[[
  Renews the leases a worker's lanes hold under globalConcurrency (see engine/global-limits.ts),
  as their locks are renewed: a slice longer than a lease keeps its place. A lease that lapsed
  meanwhile is not taken back (XX): its lane asks again at its next slice.

  KEYS[1] the batcher's leases (LimitNames.leases)
  ARGV[1] how long each lease lasts from now, ms
  ARGV[2..] the leases

  Returns how many were renewed.
]]
--- @include "clock"
local untilMs = clockMs() + tonumber(ARGV[1])
local renewed = 0
for i = 2, #ARGV do
  renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'CH', untilMs, ARGV[i])
end
return renewed

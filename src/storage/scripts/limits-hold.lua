--[[
  Holds every key of the batcher (`ctx.retryAfter(ms, { scope: 'batcher' })`, see
  engine/global-limits.ts): no lane passes limits-enter.lua until the hold ends. A longer hold
  set already stands.

  KEYS[1] the batcher's hold (LimitNames.hold)
  ARGV[1] ms

  Returns the hold's ms left.
]]
--- @include "flow"
holdFor(KEYS[1], tonumber(ARGV[1]))
return redis.call('PTTL', KEYS[1])

--[[
  What stats() shows of the batcher-wide limits (read-only; see ops/stats.ts).

  KEYS    the batcher's limit names, in `limitKeys` order (see includes/global-limits.lua)
  ARGV[1] globalRateLimit's window, ms (0: none)

  Returns {running, waiting, idsInWindow, holdMs, waitedMs, waits}: the leases not lapsed, the
  waiters, the ids the rate window holds now, the batcher hold's ms left (0: none), and the
  time keys spent waiting for a limit with how many waits.
]]
--- @include "global-limits"
local L = limitNames()
local now = clockMs()
local window = tonumber(ARGV[1])
local inWindow = 0
if window > 0 then
  for _, entry in ipairs(redis.call('LRANGE', L.rateLog, 0, -1)) do
    local at, n = string.match(entry, '^(%d+) (%d+)$')
    if tonumber(at) + window > now then inWindow = inWindow + tonumber(n) end
  end
end
local counters = redis.call('HMGET', L.counters, 'waitedMs', 'waits')
return {
  redis.call('ZCOUNT', L.leases, '(' .. now, '+inf'), redis.call('ZCARD', L.waiters), inWindow,
  math.max(0, redis.call('PTTL', L.hold)), tonumber(counters[1] or '0'), tonumber(counters[2] or '0'),
}

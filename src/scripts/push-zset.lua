--[[
  Adds ids to a key's sorted set, ready at the Redis server's now + delay. Re-adding an id moves
  it to the new time (debounce).

  KEYS[1] pending sorted set (score: ready-at ms)
  KEYS[2] retry (failed slices, scored by when they are due)
  ARGV[1] delay in ms (>= 0)
  ARGV[2..] ids

  Returns ms until the key's job should run: when its earliest id or failed slice is due
  (0: now); -1 when nothing is pending or backing off.
]]
--- @include "clock"
--- @include "chunked"
local now = clockMs()
local at = now + tonumber(ARGV[1])
local scored = {}
for i = 2, #ARGV do
  scored[#scored + 1] = at
  scored[#scored + 1] = ARGV[i]
end
chunked('ZADD', KEYS[1], scored)

local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
local retry = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]
if not first and not retry then return -1 end
local due = math.min(tonumber(first or retry), tonumber(retry or first))
return math.max(0, due - now)

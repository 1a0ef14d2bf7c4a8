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
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local at = now + tonumber(ARGV[1])
local args = {}
for i = 2, #ARGV do
  args[#args + 1] = at
  args[#args + 1] = ARGV[i]
  if #args >= 1000 then
    redis.call('ZADD', KEYS[1], unpack(args))
    args = {}
  end
end
if #args > 0 then redis.call('ZADD', KEYS[1], unpack(args)) end

local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
local retry = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]
if not first and not retry then return -1 end
local due = math.min(tonumber(first or retry), tonumber(retry or first))
return math.max(0, due - now)

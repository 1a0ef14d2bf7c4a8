--[[
  Applies the cap on dead letters: past it, the letters that failed longest ago are evicted and
  counted. Run after a failure's letters were written and fail-slice accepted it.

  KEYS[1] entries   KEYS[2] fields by time   KEYS[3] fields by attempts
  KEYS[4] prefix of the per-key sets (followed by the encoded key, the part of a field before ':')
  KEYS[5] evictions (a counter)
  ARGV[1] cap

  Returns how many letters were evicted.
]]
local over = redis.call('HLEN', KEYS[1]) - tonumber(ARGV[1])
if over <= 0 then return 0 end
local oldest = redis.call('ZPOPMIN', KEYS[2], over)
for i = 1, #oldest, 2 do
  local field = oldest[i]
  redis.call('HDEL', KEYS[1], field)
  redis.call('ZREM', KEYS[3], field)
  redis.call('ZREM', KEYS[4] .. string.match(field, '^[^:]*'), field)
end
redis.call('INCRBY', KEYS[5], over)
return over

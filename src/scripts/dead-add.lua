--[[
  Records dead letters: ids of one key whose slice used every attempt. An id that has a letter
  already (requeued, and failed again before the requeue removed it) gets this one instead. Past
  the cap, the letters that failed longest ago are evicted and counted.

  KEYS[1] entries (hash: field -> JSON entry)   KEYS[2] fields by time of last failure
  KEYS[3] fields by attempts                    KEYS[5] evictions (a counter)
  KEYS[4] prefix of the per-key sets of fields by time (followed by the encoded key; in this slot)
  ARGV[1] encoded key (a field is `${encoded key}:${id}`)     ARGV[2] key
  ARGV[3] cap       ARGV[4] attempts      ARGV[5] first failed at (ms)
  ARGV[6] last failed at (ms)             ARGV[7] error, JSON { name, message, stack }
  ARGV[8..] ids

  Returns how many letters the cap evicted.
]]
local error = cjson.decode(ARGV[7])
local attempts = tonumber(ARGV[4])
local lastAt = tonumber(ARGV[6])
local ofKey = KEYS[4] .. ARGV[1]
for i = 8, #ARGV do
  local id = ARGV[i]
  local field = ARGV[1] .. ':' .. id
  local entry = { key = ARGV[2], id = id, error = error, attempts = attempts, firstFailedAt = tonumber(ARGV[5]), lastFailedAt = lastAt }
  redis.call('HSET', KEYS[1], field, cjson.encode(entry))
  redis.call('ZADD', KEYS[2], lastAt, field)
  redis.call('ZADD', KEYS[3], attempts, field)
  redis.call('ZADD', ofKey, lastAt, field)
end

local over = redis.call('HLEN', KEYS[1]) - tonumber(ARGV[3])
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

--[[
  Takes back letters dead-add.lua wrote for a failure that fail-slice then refused (the writer had
  lost the key's lock; the new holder runs those ids again): each letter that is still the one
  written goes back to the letter it replaced, or away if it replaced none. A letter written since
  (the new holder's own) is left alone.

  KEYS[1] entries   KEYS[2] fields by time   KEYS[3] fields by attempts
  KEYS[4] prefix of the per-key sets (followed by the encoded key, the part of a field before ':')
  ARGV[1..] triples as dead-add.lua returned them: field, the letter replaced ('' for none), the
            letter written

  Returns how many letters were taken back.
]]
local undone = 0
for i = 1, #ARGV, 3 do
  local field, previous, written = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('HGET', KEYS[1], field) == written then
    local ofKey = KEYS[4] .. string.match(field, '^[^:]*')
    if previous == '' then
      redis.call('HDEL', KEYS[1], field)
      redis.call('ZREM', KEYS[2], field)
      redis.call('ZREM', KEYS[3], field)
      redis.call('ZREM', ofKey, field)
    else
      local letter = cjson.decode(previous)
      redis.call('HSET', KEYS[1], field, previous)
      redis.call('ZADD', KEYS[2], letter.lastFailedAt, field)
      redis.call('ZADD', KEYS[3], letter.attempts, field)
      redis.call('ZADD', ofKey, letter.lastFailedAt, field)
    end
    undone = undone + 1
  end
end
return undone

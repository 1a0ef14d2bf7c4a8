--[[
  Removes dead letters (purge, or after their ids were pushed again by a requeue).

  KEYS[1] entries   KEYS[2] fields by time   KEYS[3] fields by attempts
  KEYS[4] prefix of the per-key sets (followed by the encoded key, the part of a field before ':')
  ARGV[1] '1': remove a letter only if it has not failed again since it was read (its time is
          the one given), so a requeued id that died again keeps its new letter; '0': remove
  ARGV[2..] pairs of field and last failed at (ms)

  Returns how many letters were removed.
]]
local removed = 0
for i = 2, #ARGV, 2 do
  local field = ARGV[i]
  local at = redis.call('ZSCORE', KEYS[2], field)
  if at and (ARGV[1] == '0' or tonumber(at) == tonumber(ARGV[i + 1])) then
    redis.call('HDEL', KEYS[1], field)
    redis.call('ZREM', KEYS[2], field)
    redis.call('ZREM', KEYS[3], field)
    redis.call('ZREM', KEYS[4] .. string.match(field, '^[^:]*'), field)
    removed = removed + 1
  end
end
return removed

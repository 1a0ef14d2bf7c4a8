--[[
  Drops a key from the batcher's index of keys with recent pushes, unless it was pushed to
  since the caller looked (its score, the time of its last push, changed).

  KEYS[1] index sorted set (member: key, score: last push ms)
  ARGV[1] key
  ARGV[2] the score the caller saw

  Returns 1: removed, 0: kept (pushed to meanwhile, or already gone)
]]
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0

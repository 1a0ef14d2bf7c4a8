--[[
  Appends one sample to the batcher's history and trims the series to its cap, unless the series
  holds a sample of the same bucket or a later one already: a second guard beside
  history-tick's claim, for a claim key that was lost (evicted, deleted) and for a worker whose
  stats() read outlasted its interval, so the series keeps one sample per bucket, in order.

  KEYS[1] series (a list, oldest first; each entry starts with its time in ms, then a space)
  ARGV[1] the sample (see ops/history.ts encodeSample)
  ARGV[2] the interval, ms
  ARGV[3] samples kept at most
  ARGV[4] ms the series lives after its last append (the retention)

  Returns 1: appended; 0: refused (the series has a sample of this bucket or a later one).
]]
local interval = tonumber(ARGV[2])
local at = tonumber(string.match(ARGV[1], '^%d+'))
local last = redis.call('LINDEX', KEYS[1], -1)
if last then
  local lastAt = tonumber(string.match(last, '^%d+'))
  if lastAt and lastAt - lastAt % interval >= at - at % interval then return 0 end
end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[3]), -1)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1

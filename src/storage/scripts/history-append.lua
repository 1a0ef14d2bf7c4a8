--[[
  Appends one sample to the batcher's history and trims the series to its cap, unless the series
  holds a sample of the same bucket or a later one already: a second guard beside
  history-tick's claim, for a claim key that was lost (evicted, deleted) and for a worker whose
  stats() read outlasted its interval, so the series keeps one sample per bucket, in order.

  KEYS[1] series (a list, oldest first; each entry starts with its time in ms, then a space)
  ARGV    by name, generated from storage/scripts/args.ts (`history-append`):
    sample       the sample (see ops/history.ts encodeSample)
    intervalMs   the interval
    kept         samples kept at most
    retentionMs  how long the series lives after its last append

  Returns 1: appended; 0: refused (the series has a sample of this bucket or a later one).
]]
--- @include "args-history-append"
local A = historyAppendArgs()
local interval = A.intervalMs
local at = tonumber(string.match(A.sample, '^%d+'))
local last = redis.call('LINDEX', KEYS[1], -1)
if last then
  local lastAt = tonumber(string.match(last, '^%d+'))
  if lastAt and lastAt - lastAt % interval >= at - at % interval then return 0 end
end
redis.call('RPUSH', KEYS[1], A.sample)
redis.call('LTRIM', KEYS[1], -A.kept, -1)
redis.call('PEXPIRE', KEYS[1], A.retentionMs)
return 1

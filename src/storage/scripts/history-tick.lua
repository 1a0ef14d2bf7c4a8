--[[
  A worker process's sampling tick, once per interval: adds the ids the process processed since
  its last tick to the batcher's counter, and claims the current interval (the Redis clock's
  bucket) for the caller unless another worker claimed it already. With any number of worker
  processes, one of them, and only one, reads stats() for the interval and appends the sample.

  KEYS[1] claim (string: the start of the last bucket claimed, ms)
  KEYS[2] processed (counter: ids processed by every worker)
  ARGV    by name, generated from storage/scripts/args.ts (`history-tick`):
    processedHere  ids processed in the calling process since its last tick (>= 0)
    intervalMs     the interval
    retentionMs    how long both keys live after their last write

  Returns { claimed, now, processed }: claimed is 1 when the caller is to sample this bucket and
  0 when another worker does; now is the Redis clock (ms), the sample's time; processed is the
  counter after the addition.
]]
--- @include "args-history-tick"
--- @include "clock"
local A = historyTickArgs()
local now = clockMs()
local interval = A.intervalMs
local processed
if A.processedHere > 0 then
  processed = redis.call('INCRBY', KEYS[2], A.processedHere)
  redis.call('PEXPIRE', KEYS[2], A.retentionMs)
else
  processed = tonumber(redis.call('GET', KEYS[2]) or '0')
end
local bucket = now - now % interval
local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
if last >= bucket then return { 0, now, processed } end
redis.call('SET', KEYS[1], tostring(bucket), 'PX', A.retentionMs)
return { 1, now, processed }

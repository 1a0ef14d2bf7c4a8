--[[
  A worker process's sampling tick, once per interval: adds the ids the process processed since
  its last tick to the batcher's counter, and claims the current interval (the Redis clock's
  bucket) for the caller unless another worker claimed it already. With any number of worker
  processes, one of them, and only one, reads stats() for the interval and appends the sample.

  KEYS[1] claim (string: the start of the last bucket claimed, ms)
  KEYS[2] processed (counter: ids processed by every worker)
  ARGV[1] ids processed in the calling process since its last tick (>= 0)
  ARGV[2] the interval, ms
  ARGV[3] ms both keys live after their last write (the retention)

  Returns { claimed, now, processed }: claimed is 1 when the caller is to sample this bucket and
  0 when another worker does; now is the Redis clock (ms), the sample's time; processed is the
  counter after the addition.
]]
--- @include "clock"
local now = clockMs()
local interval = tonumber(ARGV[2])
local processed
if tonumber(ARGV[1]) > 0 then
  processed = redis.call('INCRBY', KEYS[2], ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
else
  processed = tonumber(redis.call('GET', KEYS[2]) or '0')
end
local bucket = now - now % interval
local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
if last >= bucket then return { 0, now, processed } end
redis.call('SET', KEYS[1], tostring(bucket), 'PX', ARGV[3])
return { 1, now, processed }

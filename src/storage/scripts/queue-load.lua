--[[
  What fair scheduling's preemption reads between slices (see scheduling.ts): how many jobs wait
  in the first level (the wait list) and, with a batcher's `priority(key)`, in normal light keys'
  level (a priority of the prioritized set), and how many jobs run. Delayed jobs that are due
  count at their priority too: a key back from a wait (a rate limit's window, a retryAfter, a
  backoff), which BullMQ moves on only when a worker fetches, so a key would otherwise wait for a
  busy slot to free by itself.

  KEYS[1] BullMQ's wait list   KEYS[2] its active list   KEYS[3] its delayed set
  KEYS[4] BullMQ's key prefix (a job's hash is the prefix followed by its id)
  KEYS[5] its prioritized set
  ARGV[1] now, ms (BullMQ's clock: the workers')
  ARGV[2] due delayed jobs looked at, at most
  ARGV[3] the BullMQ priority of normal light keys: 0 when they wait in the wait list (a batcher
          without `priority(key)`), and then no other level is counted

  Returns {waiting, running, waitingLight}: waitingLight 0 when ARGV[3] is 0.
]]
local light = tonumber(ARGV[3])
local waiting = redis.call('LLEN', KEYS[1])
local waitingLight = 0
-- BullMQ scores a prioritized job by its priority * 0x100000000 (plus a counter below that).
if light > 0 then waitingLight = redis.call('ZCOUNT', KEYS[5], light * 0x100000000, (light + 1) * 0x100000000 - 1) end
-- BullMQ scores a delayed job by its timestamp * 0x1000 (plus a counter below that).
local due = redis.call('ZRANGEBYSCORE', KEYS[3], 0, (tonumber(ARGV[1]) + 1) * 0x1000 - 1, 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(due) do
  local priority = tonumber(redis.call('HGET', KEYS[4] .. id, 'priority') or '0')
  if priority == 0 then
    waiting = waiting + 1
  elseif priority == light then
    waitingLight = waitingLight + 1
  end
end
return {waiting, redis.call('LLEN', KEYS[2]), waitingLight}

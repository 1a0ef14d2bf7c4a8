--[[
  What fair scheduling's preemption reads between slices (see scheduling.ts): how many level-0
  jobs wait for a slot, and how many jobs run. Level-0 jobs waiting are BullMQ's wait list, plus
  delayed jobs that are due and at priority 0: a key back from a wait (a rate limit's window, a
  retryAfter, a backoff), which BullMQ moves to the wait list only when a worker fetches, so a
  key would otherwise wait for a busy slot to free by itself.

  KEYS[1] BullMQ's wait list   KEYS[2] its active list   KEYS[3] its delayed set
  KEYS[4] BullMQ's key prefix (a job's hash is the prefix followed by its id)
  ARGV[1] now, ms (BullMQ's clock: the workers')
  ARGV[2] due delayed jobs looked at, at most

  Returns {waiting, running}.
]]
local waiting = redis.call('LLEN', KEYS[1])
-- BullMQ scores a delayed job by its timestamp * 0x1000 (plus a counter below that).
local due = redis.call('ZRANGEBYSCORE', KEYS[3], 0, (tonumber(ARGV[1]) + 1) * 0x1000 - 1, 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(due) do
  if tonumber(redis.call('HGET', KEYS[4] .. id, 'priority') or '0') == 0 then waiting = waiting + 1 end
end
return {waiting, redis.call('LLEN', KEYS[2])}

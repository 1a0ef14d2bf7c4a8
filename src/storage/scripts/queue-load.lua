--[[
  What fair scheduling's preemption reads between slices (see scheduling.ts): how many jobs wait
  in the first level (the wait list) and, with a batcher's `priority(key)`, in normal light keys'
  level (a priority of the prioritized set), and how many jobs run. Delayed jobs that are due
  count at their priority too: a key back from a wait (a rate limit's window, a retryAfter, a
  backoff), which BullMQ moves on only when a worker fetches, so a key would otherwise wait for a
  busy slot to free by itself.

  KEYS    BullMQ's wait list, active list, delayed set and prioritized set, and the prefix of a
          job's hash, in the order bullmq/layout.ts queueLoadKeys gives them (read by
          bullmqLoadLists)
  ARGV[1] now, ms (BullMQ's clock: the workers')
  ARGV[2] due delayed jobs looked at, at most
  ARGV[3] the BullMQ priority of normal light keys: 0 when they wait in the wait list (a batcher
          without `priority(key)`), and then no other level is counted

  Returns {waiting, running, waitingLight}: waitingLight 0 when ARGV[3] is 0.
]]
--- @include "bullmq-load"
local waitList, activeList, delayedSet, prioritizedSet, jobPrefix = bullmqLoadLists(KEYS)
local light = tonumber(ARGV[3])
local waiting = redis.call('LLEN', waitList)
local waitingLight = 0
if light > 0 then waitingLight = redis.call('ZCOUNT', prioritizedSet, bullmqPriorityScores(light)) end
local due = redis.call('ZRANGEBYSCORE', delayedSet, 0, bullmqDueScore(tonumber(ARGV[1])), 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(due) do
  local priority = bullmqJobPriority(jobPrefix, id)
  if priority == 0 then
    waiting = waiting + 1
  elseif priority == light then
    waitingLight = waitingLight + 1
  end
end
return {waiting, redis.call('LLEN', activeList), waitingLight}

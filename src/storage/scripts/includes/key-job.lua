-- A key's BullMQ job is the one its pointer names (keys.ts JOB_POINTER: the queue prefix, then
-- JOB_POINTER and the encoded key, holding the job's id), written by the calls that add it and by
-- the claim that completes it. A pointer is only a hint: the job it names is the key's job only
-- while it exists, is ours (its name is JOB_NAME: a job of the caller's own on a queue shared with
-- `processor(fallback)` is never the key's job, nor touched) and has not ended (no `finishedOn`:
-- a failed job keeps its hash). A completion BullMQ makes with its own call (a Cluster, a worker
-- of `processor()`, fastPath 'off') or a job removed by hand leaves the pointer behind, and the
-- next add overwrites it.
--- @include "keyspace"
--- @include "clock"
--- @include "queue-keys"
--- @include "bullmq-change-delay"

-- The state of the job `jobId` names (a pointer's value) on the queue whose prefix is `queue`:
-- false when it is no job of the key's (no id, or its job is gone, ended or not ours), else
-- 'active', 'delayed' (and its delayed set's score) or 'waiting' (the wait list, the prioritized
-- set, a paused queue). One HMGET, then one LPOS and one ZSCORE at most.
local function pointedJob(queue, jobId)
  if not jobId then return false end
  local job = redis.call('HMGET', queue .. jobId, 'name', 'finishedOn')
  if job[1] ~= JOB_NAME or job[2] then return false end
  if redis.call('LPOS', queue .. BULLMQ_PUSH_READS.active, jobId) then return 'active' end
  local score = redis.call('ZSCORE', queue .. BULLMQ_PUSH_READS.delayed, jobId)
  if score then return 'delayed', score end
  return 'waiting'
end

-- Moves the key's delayed job `jobId` to start in `delayMs` (from the Redis server's now): a push's
-- new ids may be due sooner than the job (backing off, waiting for a zset time or to fill), as
-- BullMQ's deduplication `reschedule` moved it. BullMQ's own changeDelay, inlined. Returns the
-- job's id, as an add that went to it replies.
local function rescheduleJob(queue, jobId, delayMs)
  bullmqChangeDelay(queueKeys(queue, BULLMQ_CHANGE_DELAY_KEYS), {delayMs, clockMs(), jobId, queue .. jobId})
  return jobId
end

-- Adds the key's job where the pointer `pointer` names none, or brings its delayed one forward
-- to `delayMs`, or leaves its waiting one. An active job (between its fetch and its first claim,
-- or between its last claim and its completion: the caller saw the key's lock free) may be past
-- the claim that would see new ids, so a new job is added and the pointer names it: the active
-- one ends as it would have. `add()` makes BullMQ's add and returns its reply (the new job's id).
-- Returns the key's job id.
local function ensureKeyJob(queue, pointer, jobId, delayMs, add)
  local state = pointedJob(queue, jobId)
  if state == 'waiting' then return jobId end
  if state == 'delayed' then return rescheduleJob(queue, jobId, delayMs) end
  local added = add()
  redis.call('SET', pointer, added)
  return added
end

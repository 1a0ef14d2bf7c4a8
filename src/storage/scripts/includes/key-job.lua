-- A key's BullMQ job is the one its pointer names (keys.ts JOB_POINTER: the queue prefix, then
-- JOB_POINTER and the encoded key, holding the job's id), written by the calls that add it and by
-- the claim that completes it. A pointer is only a hint: the job it names is the key's job only
-- while it exists, is ours (its name is JOB_NAME: a job of the caller's own on a queue shared with
-- `processor(fallback)` is never the key's job, nor touched), is this key's (its data says so) and
-- has not ended (no `finishedOn`: a failed job keeps its hash). A completion BullMQ makes with its
-- own call (a Cluster, a worker of `processor()`, fastPath 'off') or a job removed by hand leaves
-- the pointer behind: the next add overwrites it, and the recovery sweep's walk deletes it
-- (forget-pointers.lua).
--- @include "keyspace"
--- @include "clock"
--- @include "bullmq-job"
--- @include "bullmq-reschedule"

-- Whether a key job's data (KeyJobData, JSON) names `key`: after `queue.obliterate()` BullMQ's
-- job ids start again, and a pointer left behind names another key's new job. A job's data is
-- anything a user wrote under JOB_NAME, so a decode that fails is no key's.
local function jobOfKey(data, key)
  local ok, decoded = pcall(cjson.decode, data or '')
  return ok and type(decoded) == 'table' and decoded.key == key
end

-- The state of the job `jobId` names (a pointer's value) on the queue whose prefix is `queue`:
-- false when it is no job of `key`'s (no id, or its job is gone, ended, not ours or another
-- key's), else BULLMQ_ACTIVE, BULLMQ_DELAYED (and its delayed set's score) or BULLMQ_WAITING. A
-- job that is neither active nor delayed is waiting only where BullMQ fetches it with `verify`
-- (bullmqJobPlace): a job whose hash outlived its place (an eviction, an operator's DEL) would
-- otherwise cover the key for ever. That check scans the wait list, so a push (which lists its
-- key for the recovery sweep whenever a job covers it, see push.lua) trusts the hash, and an add
-- (add-job.lua: the sweep's, a hand-on, a resume) verifies. One HMGET, then bullmqJobPlace's reads.
local function pointedJob(queue, jobId, key, verify)
  if not jobId then return false end
  local name, ended, data = bullmqJob(queue, jobId)
  if name ~= JOB_NAME or ended or not jobOfKey(data, key) then return false end
  return bullmqJobPlace(queue, jobId, verify)
end

-- Moves the key's delayed job `jobId` to start in `delayMs` (from the Redis server's now): a push's
-- new ids may be due sooner than the job (backing off, waiting for a zset time or to fill), as
-- BullMQ's deduplication `reschedule` moved it. BullMQ's own reschedule, inlined. Returns the
-- job's id, as an add that went to it replies.
local function rescheduleJob(queue, jobId, delayMs)
  bullmqReschedule(queue, jobId, delayMs, clockMs())
  return jobId
end

-- Adds the key's job where the pointer `pointer` names none (`state`, pointedJob's answer for the
-- job `jobId` it names, is false), or brings its delayed one forward to `delayMs`, or leaves its
-- waiting one. An active job (between its fetch and its first claim, or between its last claim and
-- its completion: the caller saw the key's lock free) may be past the claim that would see new
-- ids, so a new job is added and the pointer names it: the active one ends as it would have.
-- `add()` makes BullMQ's add and returns its reply (the new job's id). Returns the key's job id.
local function ensureKeyJob(queue, pointer, jobId, state, delayMs, add)
  if state == BULLMQ_WAITING then return jobId end
  if state == BULLMQ_DELAYED then return rescheduleJob(queue, jobId, delayMs) end
  local added = add()
  redis.call('SET', pointer, added)
  return added
end

-- Completes a run's BullMQ job in the claim that ends the run, with BullMQ's own completion
-- (the installed version's, inlined as bullmqComplete), which also fetches the worker's next
-- job. A run of a few ids then costs one call less: the claim that finds nothing left and drops
-- the lock is the job's completion too, where BullMQ would send its completion after it.
-- Standalone Redis only: BullMQ's keys live in other slots than the key's on a Cluster.
-- BullMQ's arguments start at ARGV[firstArg]; its keys follow KEYS[firstKey], `nKeys` of them,
-- or, with nKeys -1, are derived here from its arguments (bullmqKeys' `finish` list; the caller's
-- worker checked that this gives the keys BullMQ's backend builds: see engine/claims/backend.ts), which
-- spares the call 14 key names. The worker takes the reply as its completion's; the job's id
-- comes second. The key's job pointer (keys.ts JOB_POINTER, under the queue prefix), when it
-- names this job, goes with it: one left behind would be no job (includes/key-job.lua), but would
-- cost a push a read of it.
--- @include "bullmq-complete"
local function finishJob(base, firstKey, nKeys, firstArg)
  local args = {unpack(ARGV, firstArg)}
  local queue, jobId = bullmqCompletedJob(args, 1)
  local keys
  if nKeys < 0 then
    keys = bullmqKeys(queue, 'finish', jobId)
  else
    keys = {unpack(KEYS, firstKey, firstKey + nKeys - 1)}
  end
  local reply = bullmqComplete(keys, args)
  local pointer = queue .. JOB_POINTER .. encodedKeyOf(base)
  if redis.call('GET', pointer) == jobId then redis.call('DEL', pointer) end
  return reply, jobId
end

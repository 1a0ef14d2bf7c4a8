--[[
  Adds a key's BullMQ job unless it has one (includes/key-job.lua): its waiting job is left as it
  is, its delayed one is moved to this add's delay (as BullMQ's deduplication `reschedule` moved
  it), and where its job is active, or it has none, a job is added and the key's job pointer
  names it. A job counts as waiting only where BullMQ fetches it (pointedJob's `verify`): a job
  whose hash outlived its place in BullMQ's lists is no job, so the recovery sweep's add, which
  comes here, serves a key such a job stranded. The add is BullMQ's own (addStandardJob,
  addDelayedJob or addPrioritizedJob, inlined), with the keys and arguments BullMQ built for it
  (storage/key-job.ts KeyJobs.ensure). With `add` 'added', the job was added already, by
  BullMQ's public Queue.add (KeyJobs.addThroughQueue, for a BullMQ whose adds this library does
  not know): the key is pointed at it unless the key has a job. A job not ours is never taken
  for the key's job, nor moved. Touches BullMQ's keys and the pointer only (the queue's slot, on
  a Cluster too).

  KEYS    BullMQ's keys of that add, as BullMQ built them; with 'added', the added job's hash
          (for a Cluster's routing: the queue's slot)
  ARGV    by name, generated from storage/scripts/args.ts (`add-job`):
    add          which add: 'standard' | 'delayed' | 'prioritized', or 'added' (made already)
    queuePrefix  BullMQ's queue prefix (`prefix:name:`): a job's hash is it followed by the job's
                 id, and the key's job pointer it followed by JOB_POINTER and the encoded key
    key          the key (a job of the key's holds it in its data)
    delayMs      the add's delay: a delayed job of the key's is moved to it
  ARGV[rest..] BullMQ's arguments: its packed arguments, the job's data, its packed options;
               with 'added', the added job's id

  Returns the id of the key's job: the one added, or the one the add went to.
]]
--- @include "args-add-job"
--- @include "keyspace"
--- @include "key-job"
--- @include "bullmq-adds"
--- @include "key-job-events"
local A = addJobArgs()
local pointer = A.queuePrefix .. JOB_POINTER .. encodeKey(A.key)
local current = redis.call('GET', pointer)
holdBullmqEvents(true)
local jobId = ensureKeyJob(A.queuePrefix, pointer, current, pointedJob(A.queuePrefix, current, A.key, true), A.delayMs, function()
  if A.add == 'added' then return ARGV[A.rest] end
  return bullmqAdd(A.add, KEYS, {unpack(ARGV, A.rest)})
end)
releaseBullmqEvents(keepNone)
return jobId

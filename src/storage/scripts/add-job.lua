--[[
  Adds a key's BullMQ job unless it has one; one it has is moved as BullMQ's deduplication moves
  it (a delayed job to this add's delay, an active one gets this add as its next job). The add
  is BullMQ's own (addStandardJob, addDelayedJob or addPrioritizedJob, inlined), with the keys and
  arguments BullMQ built for it (storage/job.ts ensureJob), under the deduplication id of the
  key's job that includes/key-job.lua picks in this same call: so a job not ours that holds an id
  of the key is never taken for its job, nor moved. Touches BullMQ's keys only (the queue's slot,
  on a Cluster too).

  KEYS    BullMQ's keys of that add, as BullMQ built them
  ARGV    by name, generated from storage/scripts/args.ts (`add-job`):
    add          which add: 'standard' | 'delayed' | 'prioritized'
    queuePrefix  BullMQ's queue prefix (`prefix:name:`): a job's hash is it followed by the job's id
    dedupPrefix  BullMQ's deduplication keys' prefix (`prefix:name:de:`): a deduplication key is it
                 followed by the id
    encodedKey   the key, encoded: its own deduplication id, the one BullMQ's arguments carry
  ARGV[rest..] BullMQ's arguments: its packed arguments, the job's data, its packed options

  Returns BullMQ's reply (the id of the job added, or of the key's job the add went to), or nil
  when jobs not ours hold both ids of the key (nothing is added).
]]
--- @include "args-add-job"
--- @include "keyspace"
--- @include "key-job"
--- @include "bullmq-add-standard-job"
--- @include "bullmq-add-delayed-job"
--- @include "bullmq-add-prioritized-job"
--- @include "key-job-events"
local ADDS = { standard = bullmqAddStandardJob, delayed = bullmqAddDelayedJob, prioritized = bullmqAddPrioritizedJob }
local A = addJobArgs()
local add = ADDS[A.add]
if not add then error('batch-by-key: no BullMQ add ' .. tostring(A.add)) end
local spareId = SPARE_DEDUP_PREFIX .. A.encodedKey
local spareKey = A.dedupPrefix .. spareId
local held = redis.call('MGET', A.dedupPrefix .. A.encodedKey, spareKey)
local _, dedup = keyJobOf(A.queuePrefix, held[1], held[2])
if not dedup then return nil end
local args = {unpack(ARGV, A.rest)}
if dedup == 'spare' then args = withDedupId(args, spareKey, spareId) end
holdBullmqEvents()
local added = add(KEYS, args)
releaseBullmqEvents(keepNone)
return added

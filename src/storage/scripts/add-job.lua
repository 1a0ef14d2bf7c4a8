--[[
  Adds a key's BullMQ job unless it has one; one it has is moved as BullMQ's deduplication moves
  it (a delayed job to this add's delay, an active one gets this add as its next job). The add
  is BullMQ's own (addStandardJob, addDelayedJob or addPrioritizedJob, inlined), with the keys and
  arguments BullMQ built for it (storage/job.ts ensureJob), under the deduplication id of the
  key's job that includes/key-job.lua picks in this same call: so a job not ours that holds an id
  of the key is never taken for its job, nor moved. Touches BullMQ's keys only (the queue's slot,
  on a Cluster too).

  KEYS    BullMQ's keys of that add, as BullMQ built them
  ARGV[1] which add: 'standard' | 'delayed' | 'prioritized'
  ARGV[2] BullMQ's queue prefix (`prefix:name:`): a job's hash is it followed by the job's id
  ARGV[3] BullMQ's deduplication keys' prefix (`prefix:name:de:`): a deduplication key is it
          followed by the id
  ARGV[4] the key, encoded: its own deduplication id, the one BullMQ's arguments carry
  ARGV[5..7] BullMQ's arguments: its packed arguments, the job's data, its packed options

  Returns BullMQ's reply (the id of the job added, or of the key's job the add went to), or nil
  when jobs not ours hold both ids of the key (nothing is added).
]]
--- @include "keyspace"
--- @include "key-job"
--- @include "bullmq-add-standard-job"
--- @include "bullmq-add-delayed-job"
--- @include "bullmq-add-prioritized-job"
local ADDS = { standard = bullmqAddStandardJob, delayed = bullmqAddDelayedJob, prioritized = bullmqAddPrioritizedJob }
local add = ADDS[ARGV[1]]
if not add then error('batch-by-key: no BullMQ add ' .. tostring(ARGV[1])) end
local spareId = SPARE_DEDUP_PREFIX .. ARGV[4]
local spareKey = ARGV[3] .. spareId
local held = redis.call('MGET', ARGV[3] .. ARGV[4], spareKey)
local _, dedup = keyJobOf(ARGV[2], held[1], held[2])
if not dedup then return nil end
local args = {ARGV[5], ARGV[6], ARGV[7]}
if dedup == 'spare' then args = withDedupId(args, spareKey, spareId) end
return add(KEYS, args)

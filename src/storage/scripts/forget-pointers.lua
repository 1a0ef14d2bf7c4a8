--[[
  Deletes the key job pointers (keys.ts JOB_POINTER) that name no job of their key's: the job is
  gone (removed through BullMQ, cleaned, drained, obliterated), has ended (a completion BullMQ made
  with its own call: a Cluster, `processor()`, fastPath 'off'), is another key's (job ids start
  again after an obliterate) or has lost its place in BullMQ's lists (includes/key-job.lua
  pointedJob, verified). The recovery sweep's walk sends the pointers it finds (engine/recovery.ts):
  a pointer left behind would cost memory for every key ever pushed, and could name a job that is
  not the key's.

  KEYS    the pointers, all under one queue prefix (the queue's slot, on a Cluster too)
  ARGV[1] that queue prefix (`prefix:name:`)
  ARGV[2..] each pointer's key, in KEYS' order

  Returns the keys whose pointer it deleted (the caller lists them for the sweep: their job may
  have gone with ids left).
]]
--- @include "key-job"
local queue = ARGV[1]
local gone = {}
for i = 1, #KEYS do
  local jobId = redis.call('GET', KEYS[i])
  if jobId and not pointedJob(queue, jobId, ARGV[i + 1], true) then
    redis.call('DEL', KEYS[i])
    gone[#gone + 1] = ARGV[i + 1]
  end
end
return gone

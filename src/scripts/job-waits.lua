--[[
  Whether a key's BullMQ job is waiting to start (waiting or prioritized): such a job will claim
  soon, so a push that lands now needs no job add. An active job may be between its last (empty)
  claim and its completion, and a delayed one may be backing off or waiting for a zset time, so
  for them the answer is no (the add brings a delayed job forward).
  Run inside the push's MULTI, so the answer holds at the instant the ids land.

  KEYS[1] BullMQ's deduplication key of the key's job (holds the job id)
  KEYS[2] BullMQ's active list of the queue
  KEYS[3] BullMQ's delayed set of the queue

  Returns 1: the job is waiting to start; 0: otherwise
]]
local jobId = redis.call('GET', KEYS[1])
if not jobId then return 0 end
if redis.call('LPOS', KEYS[2], jobId) then return 0 end
if redis.call('ZSCORE', KEYS[3], jobId) then return 0 end
return 1

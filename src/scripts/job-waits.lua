--[[
  Whether a key's BullMQ job exists and has not started (waiting, delayed or prioritized): such a
  job will claim later, so a push that lands now needs no job add. An active job may be between
  its last (empty) claim and its completion, so for it the answer is no.
  Run inside the push's MULTI, so the answer holds at the instant the ids land.

  KEYS[1] BullMQ's deduplication key of the key's job (holds the job id)
  KEYS[2] BullMQ's active list of the queue

  Returns 1: the job exists and is not active; 0: otherwise
]]
local jobId = redis.call('GET', KEYS[1])
if not jobId then return 0 end
if redis.call('LPOS', KEYS[2], jobId) then return 0 end
return 1

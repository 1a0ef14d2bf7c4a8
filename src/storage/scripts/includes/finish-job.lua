-- Completes a run's BullMQ job in the claim that ends the run, with BullMQ's own moveToFinished
-- (the installed version's, inlined as bullmqMoveToFinished), which also fetches the worker's
-- next job. A run of a few ids then costs one call less: the claim that finds nothing left and
-- drops the lock is the job's completion too, where BullMQ would send moveToFinished after it.
-- Standalone Redis only: BullMQ's keys live in other slots than the key's on a Cluster.
-- BullMQ's `nKeys` keys follow KEYS[firstKey], and its arguments ARGV[firstArg]; the caller's
-- worker built them (see engine/finisher.ts) and takes the reply as its moveToFinished's.
--- @include "bullmq-move-to-finished"
local function finishJob(firstKey, nKeys, firstArg)
  local keys, args = {}, {}
  for i = firstKey, firstKey + nKeys - 1 do keys[#keys + 1] = KEYS[i] end
  for i = firstArg, #ARGV do args[#args + 1] = ARGV[i] end
  return bullmqMoveToFinished(keys, args)
end

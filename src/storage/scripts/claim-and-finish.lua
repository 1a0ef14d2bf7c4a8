--[[
  A single-lane run's claim on a standalone Redis that may end the run: as claim.lua, and when it
  claims nothing and nothing is due later (the lock is released here), it completes the run's
  BullMQ job in the same call with BullMQ's own moveToFinished (see includes/finish-job.lua),
  which also fetches the worker's next job, and drops the key's job pointer when it names that job;
  when the next job is a key job, it makes that key's first claim too (see includes/fused-claim.lua), as fetch-and-claim.lua would. A run of one slice is
  then one round trip, as a BullMQ job is.

  KEYS[1]  the key's base name (see claim.lua)
  KEYS[2..] with finishKeys > 0: BullMQ's moveToFinished keys
  ARGV     by name, generated from storage/scripts/args.ts (`claim-and-finish`): claim.lua's (its
           wait to fill, fillMin and fillMaxWaitMs, goes to the next job's first claim too: a
           worker fuses runs only when every key has the same), then
    finishKeys  how many of BullMQ's keys follow ours (-1: none sent, they are derived from
                BullMQ's arguments; see finish-job.lua)
    nextLock    the lock value for the first claim of the next job BullMQ's completion fetches,
                if it is a key job ('': none)
    root        the batcher's root name (key bases are built from it, see keys.ts)
  ARGV[rest..] BullMQ's moveToFinished arguments

  Returns claim-key.lua's reply; its `finished` field is BullMQ's moveToFinished reply, carrying
  the next job's first claim (bullmqCarry) when one was made. Writes no entry of a key job's
  to BullMQ's event stream (see includes/key-job-events.lua).
]]
--- @include "args-claim-and-finish"
--- @include "fused-claim"
--- @include "finish-job"
--- @include "key-job-events"
local A = claimAndFinishArgs()
local function finish()
  -- The run's own job is ours: its events go as they are made.
  local _, jobId = bullmqCompletedJob(ARGV, A.rest)
  holdBullmqEvents(jobId)
  local reply, finished = finishJob(KEYS[1], 2, A.finishKeys, A.rest)
  local nextId, nextOurs
  if A.nextLock ~= '' then
    nextId, nextOurs = claimFetched(reply, A.root, firstClaimArgs(A.store, A.nextLock, A.count, A.lockTtlMs, true, A.rateMax,
      A.rateWindowMs, A.fillMin, A.fillMaxWaitMs))
  else
    nextId, nextOurs = fetchedJob(reply)
    nextOurs = nextOurs ~= nil
  end
  local known = {[finished] = true}
  if nextId then known[nextId] = nextOurs end
  releaseBullmqEvents(keepNotOurs(known))
  return reply
end
return claimKey(storeOf(A.store), keyNames(KEYS[1], A.lane), A, finish)

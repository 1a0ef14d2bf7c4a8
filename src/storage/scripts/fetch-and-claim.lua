--[[
  BullMQ's moveToActive (the installed version's, inlined), and, when the job it fetches is a
  key job, that key's first claim in the same call (see includes/fused-claim.lua): the lock is
  taken, what a dead run left is recovered, and the first slice is claimed. Standalone Redis
  only (BullMQ's keys and the key's are in different slots on a Cluster); see engine/claims/fused.ts.

  KEYS    BullMQ's moveToActive keys, as its backend builds them
  ARGV    by name, generated from storage/scripts/args.ts (`fetch-and-claim`): what the first
          claim of any key job the worker fetches takes (see fused-claim.lua firstClaimArgs):
    store, root     the batcher's store and root name (key bases are built from it, see keys.ts)
    lock            the lock value of the fetched key's run
    count           how many ids its first claim takes
    lockTtlMs       the lock's TTL
    releaseIfEmpty  a single-lane run, whose claim releases the lock when it finds nothing
    rateMax, rateWindowMs  the rate limit (0: none)
    fillMin, fillMaxWaitMs  wait to fill: minSliceSize (1: no wait) and maxWaitMs (see
                    includes/fill.lua)
  ARGV[rest..] BullMQ's moveToActive arguments

  Returns BullMQ's reply, carrying the first claim's reply (claim-key.lua's; bullmqCarry) when it
  fetched a key job. Writes no entry of a key job's to BullMQ's event stream (see
  includes/key-job-events.lua).
]]
--- @include "bullmq-fetch"
--- @include "args-fetch-and-claim"
--- @include "fused-claim"
--- @include "key-job-events"
local F = fetchAndClaimArgs()
holdBullmqEvents()
local reply = bullmqFetch(KEYS, {unpack(ARGV, F.rest)})
-- The claim's includes are top-level: a function library builds them once per server, so a
-- fetch that finds nothing pays nothing for them. (By EVALSHA, on Redis < 7, every fetch builds
-- them, a few µs: they used to be built here only when a job came, which cost a fetch with a job
-- about a quarter of its time under FCALL.)
local jobId, ours = claimFetched(reply, F.root, firstClaimArgs(F.store, F.lock, F.count, F.lockTtlMs, F.releaseIfEmpty, F.rateMax,
  F.rateWindowMs, F.fillMin, F.fillMaxWaitMs))
releaseBullmqEvents(keepNotOurs(jobId and {[jobId] = ours} or {}))
return reply

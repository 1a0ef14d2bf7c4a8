-- A fetched job's first claim, in the call that fetched it (fetch-and-claim.lua's fetch, or the
-- fetch of the next job inside a run's last claim, claim-and-finish.lua), so that in steady
-- state a run of one slice is one round trip, as a BullMQ job is. `reply` is BullMQ's fetch
-- reply, read through bullmqFetchedJob. Only our key jobs are claimed for: their name is
-- JOB_NAME, and their data (KeyJobData, JSON) holds their key, from which the key's base name is
-- built. The reply carries the claim's reply (see claim-key.lua; bullmqCarry). A claim that
-- fails (a key of the wrong type, say) must not fail the fetch, whose job is active by now and
-- would wait for BullMQ's stalled check: the reply then carries {0, error}, and the run makes
-- its own first claim, which meets the error where the run can handle it.
--- @include "keyspace"
--- @include "stores"
--- @include "claim-key"
--- @include "bullmq-fetched"

-- A run's first claim made by a fetch, as claim.lua's arguments (see args.ts): it takes the lock
-- with `lock`, recovers what a dead run left in flight, and claims the first slice, as a run's
-- own first claim does (engine/key-run.ts); `once`: it is never resent, so its claim id need not
-- be remembered.
local function firstClaimArgs(store, lock, count, lockTtlMs, releaseIfEmpty, rateMax, rateWindowMs, fillMin, fillMaxWaitMs)
  return {
    store = store, lock = lock, claimId = lock .. ':0:1', settle = 'recover', count = count, lane = 0,
    lockTtlMs = lockTtlMs, takeLock = true, releaseIfEmpty = releaseIfEmpty, rateMax = rateMax,
    rateWindowMs = rateWindowMs, holdMs = 0, once = true, fillMin = fillMin, fillMaxWaitMs = fillMaxWaitMs,
  }
end

-- The claim of a fetched key: a function of its arguments, so that pcall needs no closure. A job
-- named like ours whose key is no string (a user's `{ key: 5 }`) is refused by the processor, so
-- it claims nothing: Lua would take 5 for the key "5" and hold that key's lock for lockTtlMs.
local function claimFetchedKey(root, data, A)
  local key = cjson.decode(data).key
  if type(key) ~= 'string' then error('batch-by-key: a job named like ours whose data has no string key') end
  return claimKey(storeOf(A.store), keyNames(keyBase(root, encodeKey(key)), 0), A)
end

-- The job a fetch fetched (`reply` as claimFetched takes it): its id, nil when none, and its
-- data when it is a key job of ours that will run (nil otherwise). A job BullMQ's stalled check
-- gave up on carries a deferred failure: the worker fails it without calling the processor, so a
-- claim made for it would keep the key's lock for lockTtlMs with no run to release it (its
-- `failed` event lists the key for the recovery sweep instead; see engine/attach.ts).
local function fetchedJob(reply)
  local jobId, name, data, failing = bullmqFetchedJob(reply)
  return jobId, name == JOB_NAME and not failing and data or nil
end


-- Claims for the fetched job when it is a key job; returns its id and whether it is ours (see fetchedJob).
local function claimFetched(reply, root, A)
  local jobId, data = fetchedJob(reply)
  if not data then return jobId, false end
  local ok, claimed = pcall(claimFetchedKey, root, data, A)
  bullmqCarry(reply, ok and claimed or {0, type(claimed) == 'table' and claimed.err or tostring(claimed)})
  return jobId, true
end

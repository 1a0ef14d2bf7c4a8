--[[
  Settles a key's previous slice and claims the next one, for the holder of the key's lock (see
  includes/claim-key.lua for what it does and its reply; includes/stores.lua for each store). The
  claim of every run but a standalone single-lane run's last (claim-and-finish.lua) and, where
  no fetch claimed for it (a Cluster, the plain path), a run's first.

  KEYS[1] the key's base name: every name of the key is derived from it (see keys.ts)
  ARGV    by name, generated from storage/scripts/args.ts (`claim`):
    store      the key's store: 'list', 'set' or 'zset'
    lock       the lock value (fencing: nothing changes unless the caller holds the lock)
    claimId    unique per call within a job run; a resent call with the same id changes nothing
               and gets the same reply
    settle     'ack': the in-flight ids are done; 'restore': put them back in front of pending (a
               graceful stop); 'recover' (a run's first claim): what a dead run left in flight,
               in any lane, is a failed run of it (see settle-previous.lua)
    count      how many ids to claim; 0 settles only (while MAX_RETRYING_SLICES failed slices
               back off, no new pending ids are claimed: a key whose every slice fails, say
               during an outage, waits instead of burning through its attempts)
    lane       0 for a single-lane run: lane n's own names are lane 0's followed by ':n'
    lockTtlMs  the lock's TTL (the claim id is remembered as long)
    takeLock   a run's first claim: take the lock with `lock` as its value if it is free. Taking
               it here, not in a call of its own, spares a round trip per run; taking it again
               with the same value is a no-op, so a resent first claim is safe.
    releaseIfEmpty  when nothing is claimed, release the lock in this same call (the run ends; a
               single-lane run asks this). Pushes skip the job add while the lock is held (see
               push.lua), so a lock may only be dropped by a call that has looked at pending last.
    rateMax, rateWindowMs  the key's rate limit: at most rateMax ids claimed in any window; 0: none
    holdMs     hold the key this many ms (a handler's retryAfter), before claiming; 0: no
    fillMin, fillMaxWaitMs  wait to fill: the key's minSliceSize (1: no wait) and maxWaitMs (see
               includes/fill.lua); pending ids that wait to fill are not claimed

  Returns claim-key.lua's reply.
]]
--- @include "args-claim"
--- @include "stores"
--- @include "claim-key"
local A = claimArgs()
return claimKey(storeOf(A.store), keyNames(KEYS[1], A.lane), A)

--[[
  Settles a key's previous slice and claims the next one, for the holder of the key's lock (see
  includes/claim-key.lua for what it does and its reply; includes/stores.lua for each store).

  KEYS[1] the key's base name: every name of the key is derived from it (see claim-keys.lua)
  KEYS[2..] with ARGV[13] > 0: BullMQ's moveToFinished keys, to complete the run's job
  ARGV[1] the key's store: 'list', 'set' or 'zset'
  ARGV[2] lock value (fencing: nothing changes unless the caller holds the lock)
  ARGV[3] claim id, unique per call within a job run; a resent call with the same id changes
          nothing and gets the same reply
  ARGV[4] 'ack': the in-flight ids are done; 'restore': put them back in front of pending (a
          graceful stop); 'recover' (a run's first claim): what a dead run left in flight, in
          any lane, is a failed run of it (see settle-previous.lua)
  ARGV[5] how many ids to claim; 0 settles only (while MAX_RETRYING_SLICES failed slices back
          off, no new pending ids are claimed: a key whose every slice fails, say during an
          outage, waits instead of burning through its attempts)
  ARGV[6] the lane (0 for a single-lane run): lane n's own names are lane 0's followed by ':n'
  ARGV[7] the lock's TTL in ms (the claim id is remembered as long)
  ARGV[8] '1' (a run's first claim): take the lock with ARGV[2] as its value if it is free.
          Taking it here, not in a call of its own, spares a round trip per run; taking it
          again with the same value is a no-op, so a resent first claim is safe.
  ARGV[9] '1': when nothing is claimed, release the lock in this same call (the run ends; a
          single-lane run asks this). Pushes skip the job add while the lock is held (see
          push.lua), so a lock may only be dropped by a call that has looked at pending last.
  ARGV[10] the key's rate limit: at most this many ids claimed in any ARGV[11] ms; 0: none
  ARGV[12] hold the key this many ms (a handler's retryAfter), before claiming; 0: no
  ARGV[13] with ARGV[9]: how many of BullMQ's keys follow ours, to complete the run's job in the
           call that ends the run (0: none; -1: none sent, they are derived from BullMQ's
           arguments; see finish-job.lua). When not 0:
  ARGV[14] the lock value for the first claim of the next job BullMQ's completion fetches, if it
           is a key job ('': none; see fused-claim.lua; it gets ARGV[1], [5], [7], [9]-[11])
  ARGV[15] the batcher's root name (key bases are built from it, see keys.ts)
  ARGV[16..] BullMQ's moveToFinished arguments

  Returns claim-key.lua's reply; its `finished` field is BullMQ's moveToFinished reply, with the
  next job's first claim as its fifth element when one was made.
]]
--- @include "claim-keys"
--- @include "fused-claim"
--- @include "finish-job"
A = claimArgs()
K = keyNames(KEYS[1], A.lane)
local function finish()
  local reply = finishJob(2, A.finishKeys, 16)
  if ARGV[14] ~= '' then
    claimFetched(reply, ARGV[15], firstClaimArgs(A.store, ARGV[14], A.count, A.lockTtlMs, true, A.rateMax, A.rateWindowMs))
  end
  return reply
end
return claimKey(storeOf(A.store), finish)

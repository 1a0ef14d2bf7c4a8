-- The shared body of the claim scripts; each includes claim-keys (the keys and arguments below,
-- by name, as K and A) and defines `store` (inFlightIds, restore, toInFlight,
-- takePending, kind, perPush) and includes this.
--
-- KEYS[1] pending ids            KEYS[2] in-flight ids (of this lane)
-- KEYS[3] lock                   KEYS[4] id of the last claim applied (of this lane)
-- KEYS[5] retry (sorted set of failed slices, scored by when they are due)
-- KEYS[6] retry slices (hash: slice id -> JSON with its ids and failure history)
-- KEYS[7] tracked ids waiting    KEYS[8] tracked ids in flight (of this lane)
-- KEYS[9] ticket prefix (ticket hashes are named from it, in this key's hash slot)
-- KEYS[10] push marks (lag; see push.lua)
-- KEYS[11] mark of the slice in flight: when its oldest id was pushed (list), pending since (set),
--          ready (zset), or, for a failed slice run again, claimed
-- KEYS[12] the JSON of the failed slice in flight, if it is one (of this lane)
-- ARGV[1] lock value (fencing: nothing changes unless the caller holds the lock)
-- ARGV[2] claim id, unique per call within a job run; a resent call with the same id
--         changes nothing and gets the same reply
-- ARGV[3] 'ack': the in-flight ids are done; 'restore': put them back in front of pending
--         (a graceful stop); 'recover' (a run's first claim): what a dead run left in flight
--         is a failed run of it (see settle-previous)
-- ARGV[4] how many ids to claim; 0 settles only
-- ARGV[5] while this many failed slices back off, claim no new pending ids (a key whose every
--         slice fails, say during an outage, waits instead of burning through its attempts)
-- ARGV[6] with 'recover': how many other lanes to recover too (lane 0's first claim recovers
--         them all)
-- ARGV[7] the lock's TTL in ms (the claim id is remembered as long)
-- ARGV[8] '1' (a run's first claim): take the lock with ARGV[1] as its value if it is free.
--         Taking it here, not in a call of its own, spares a round trip per run; taking it
--         again with the same value is a no-op, so a resent first claim is safe.
-- ARGV[9] '1': when nothing is claimed, release the lock in this same call (the run ends; a
--         single-lane run asks this). Pushes skip the job add while the lock is held (see
--         push.lua), so a lock may only be dropped by a call that has looked at pending last.
-- KEYS[13] paused (by an operator)  KEYS[14] hold (a rate limit, a retryAfter)
-- KEYS[15] the rate limit's window of claims   KEYS[19] its sum (see includes/flow.lua)
-- KEYS[16] data per id waiting     KEYS[17] data per id in flight (of this lane; see includes/payloads.lua)
-- KEYS[18] the key's outbox of settled tickets whose callback job is still to add (see tracking.lua)
-- ARGV[10] the key's rate limit: at most this many ids claimed in any ARGV[11] ms; 0: none
-- ARGV[12] hold the key this many ms (a handler's retryAfter), before claiming; 0: no
-- ARGV[13] with ARGV[9]: how many of BullMQ's keys follow ours, to complete the run's job in
--          the call that ends the run (0: none; see finish-job.lua), and its arguments follow
--          ARGV[13]
--
-- Returns {1, waitMs, slice, waited, payloads, settled, finished, id...}: a due failed slice (its JSON as
--         `slice`, its ids alone), or else pending ids ('' as `slice`); `waited` is how long the
--         slice's mark (KEYS[11]) is old, -1 without one; `payloads` the JSON object of the
--         claimed ids' data (see includes/payloads.lua), '' without; `settled` the tickets whose
--         last id the ack settled and that want a callback, space-separated ('' for none);
--         `finished` BullMQ's moveToFinished reply when this call completed the job, else ''; when
--         nothing is claimed, waitMs is how long until
--         something is due (0: nothing left at all; -1: paused until resumed)
--         {-1, pttl}: the lock is held with another value, for pttl ms (-1: no TTL; -2: it was
--         not held at all and ARGV[8] is not '1')
--- @include "clock"
--- @include "tracking"
--- @include "payloads"
--- @include "settle-previous"
--- @include "flow"
--- @include "due"
--- @include "finish-job"
local early = settlePrevious(store, K, A)
if early then return early end

holdFor(K.hold, A.holdMs)
-- Almost always none of these exists: one call spares the reads each would need (a pause or
-- hold, failed slices, tickets, data).
local plain = redis.call('EXISTS', K.paused, K.hold, K.retry, K.tracked, K.payloads) == 0

local result = {1, 0, '', -1, '', table.concat(settledTickets, ' '), ''}
local count = A.count
local rateMax, window = A.rateMax, A.rateWindowMs
-- A paused or held key claims nothing, and so does a limited one that has no room left: the
-- run ends and its job waits (a delayed job holds no worker slot) for as long as this says.
local held = count > 0 and not plain and heldFor(K.paused, K.hold) or nil
local allowance, limited
if count > 0 and not held and rateMax > 0 then
  allowance, limited = rateAllowance(K.rateLog, K.rateUsed, rateMax, window, math.min(count, rateMax))
  if allowance > 0 then count, limited = math.min(count, allowance), nil end
end

if count > 0 and not held and not limited then
  local ids, mark
  -- The retry set, when it exists, is almost always empty: one ZCARD spares the lookups below.
  local retrying = plain and 0 or redis.call('ZCARD', K.retry)
  local due = retrying > 0 and redis.call('ZRANGEBYSCORE', K.retry, '-inf', clockMs(), 'LIMIT', 0, 1)[1]
  local slice = due and redis.call('HGET', K.retrySlices, due)
  local decoded = slice and cjson.decode(slice)
  if decoded and allowance and #decoded.ids > allowance and allowance < rateMax then
    -- A failed slice runs again whole: it waits until the window has room for all of it.
    limited = select(2, rateAllowance(K.rateLog, K.rateUsed, rateMax, window, math.min(#decoded.ids, rateMax)))
  elseif due then
    retrying = retrying - 1
    redis.call('ZREM', K.retry, due)
    redis.call('HDEL', K.retrySlices, due)
    if decoded then
      ids = decoded.ids
      mark = clockMs()
      store.toInFlight(ids, mark)
      redis.call('SET', K.inFlightMark, mark)
      -- Kept with the ids in flight: if the run dies, the slice's history survives it.
      redis.call('SET', K.inFlightSlice, slice)
      result[3] = slice
    end
  end
  local blocked = retrying >= A.maxRetrying
  if not ids and not blocked and not limited then
    ids, mark = store.takePending(count)
  end
  if ids and #ids > 0 then
    if not plain then
      trackClaim(K.tracked, K.trackedInFlight, ids, store.perPush)
      result[5] = claimPayloads(K.payloads, K.payloadsInFlight, ids, store.perPush)
    end
    if rateMax > 0 then rateSpend(K.rateLog, K.rateUsed, #ids, window) end
    if mark then result[4] = math.max(0, clockMs() - tonumber(mark)) end
    for i = 1, #ids do result[i + 7] = ids[i] end
  elseif not limited then
    -- Nothing taken: a list's or set's pending is empty (or the key is blocked), so only a
    -- zset's pending can still say when.
    local due = dueAt(store.kind, K.pending, K.retry, blocked or store.kind ~= 'zset', retrying)
    if due then result[2] = math.max(1, due - clockMs()) end
  end
end
if held then result[2] = held end
if limited then
  result[2] = limited
  -- Held too, so pushes meanwhile leave its delayed job where it is (see push.lua).
  holdFor(K.hold, limited)
end

if A.releaseIfEmpty and count > 0 and #result == 7 then
  redis.call('DEL', K.lock, K.lastClaim)
  -- Nothing left and nothing due later: the run is over, and so is its job.
  if A.finishKeys > 0 and result[2] == 0 then result[7] = finishJob(A.finishKeys) end
  return result
end
-- Remembered (with its waitMs) as long as the lock could live, so a resent claim changes
-- nothing and gets the same reply; another run's claim ids never match it.
redis.call('SET', K.lastClaim, A.claimId .. '|' .. result[2], 'PX', A.lockTtlMs)
return result

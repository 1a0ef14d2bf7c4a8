-- The start of every claim: fencing, idempotency, and settling the previous slice. Its functions
-- take the claim's key names and arguments (K, A: see claim-key.lua), and the call's ticket log
-- (see tracking.lua ticketLog).
-- Returns the reply to send at once, or nil to go on:
-- {REPLY.lockNotHeld, pttl} when the caller does not hold the lock (and cannot take it, see
-- A.takeLock); when this claim was already applied, its reply again, as claim-key.lua's with no
-- waited, settled, finished or traces: {REPLY.ok, waitMs, slice, -1, payloads, '', '', '', id...}
-- (the claim id is remembered with its waitMs, `claimId|waitMs`, and a failed slice's JSON is kept
-- in flight with it; the trace context of pending ids went with the first reply: links are
-- observability, a resent claim's slice does without them).

--- @include "extras"
--- @include "priority"

-- A slice a dead run left in flight counts as a failed run of it (a poison id that kills its
-- worker must still reach the dead letters): it becomes a failed slice, due now, one attempt on.
-- L: the lane's names (keyNames(K.base, lane)).
local function recoverLane(store, K, A, L, lane)
  local ids = store.inFlightIds(L.inFlight)
  if #ids > 0 then
    markExtras(K)
    local previous = redis.call('GET', L.inFlightSlice)
    local slice = previous and cjson.decode(previous) or { attempts = 0, isolating = false }
    local now = clockMs()
    slice.ids = ids
    slice.attempts = slice.attempts + 1
    slice.firstFailedAt = slice.firstFailedAt or now
    slice.crashed = true
    local id = 'crashed:' .. A.claimId .. ':' .. lane
    redis.call('ZADD', K.retry, now, id)
    redis.call('HSET', K.retrySlices, id, cjson.encode(slice))
    keepForRetry(K.retryData, L.payloadsInFlight, id, ids)
    redis.call('DEL', L.inFlight)
  end
  untrackAll(K.tracked, L.trackedInFlight)
  unclaimAllPayloads(K.payloads, L.payloadsInFlight)
  redis.call('DEL', L.inFlightMark, L.inFlightSlice, L.inFlightHigh)
end

-- Holds the lock with A.lock, taking it if it is free and A.takeLock asks (one call when it is);
-- also returns the last claim applied while held. (GET, not MGET: a lock key of another type
-- must fail loudly.)
local function holdLock(K, A)
  if A.takeLock and redis.call('SET', K.lock, A.lock, 'NX', 'PX', A.lockTtlMs) then return true, nil end
  local holder = redis.call('GET', K.lock)
  if holder == A.lock then return true, redis.call('GET', K.lastClaim) end
  return false
end

-- What a dead run may have left: its lane 0's keys, and the mark of a run with lanes.
local function recoverable(K)
  return {K.inFlight, K.trackedInFlight, K.inFlightMark, K.inFlightSlice, K.payloadsInFlight, K.lanes}
end

-- `quiet` is true when the caller read, in one call with more (see claim-key.lua), that the key
-- has no extras (see extras.lua: so no ticket or data of an id in flight, no retryAfter streak)
-- and, for a first claim, nothing a dead run left.
local function settlePrevious(store, K, A, log, quiet)
  local held, last = holdLock(K, A)
  if not held then return {REPLY.lockNotHeld, redis.call('PTTL', K.lock)} end
  local applied = A.claimId .. '|'
  if last and string.sub(last, 1, #applied) == applied then
    local ids = store.inFlightIds(K.inFlight)
    table.insert(ids, 1, '')
    table.insert(ids, 1, '')
    table.insert(ids, 1, '')
    table.insert(ids, 1, inFlightPayloads(K.payloadsInFlight))
    table.insert(ids, 1, -1)
    table.insert(ids, 1, redis.call('GET', K.inFlightSlice) or '')
    table.insert(ids, 1, tonumber(string.sub(last, #applied + 1)))
    table.insert(ids, 1, REPLY.ok)
    return ids
  end
  if A.settle == 'ack' then
    if quiet then
      -- No extras: so no failed slice in flight either (its retry set the mark).
      redis.call('DEL', K.inFlight, K.inFlightMark)
    else
      -- A slice that succeeded also ends a streak of retryAfter asks (see flow.lua holdAfter).
      redis.call('DEL', K.inFlight, K.inFlightMark, K.inFlightSlice, K.payloadsInFlight, K.retryAfterStreak, K.inFlightHigh)
      creditAll(log, K.trackedInFlight, K.ticketPrefix, K.settledTickets, 'done')
    end
  elseif A.settle == 'restore' then
    local slice = redis.call('GET', K.inFlightSlice)
    local R = restoreNames(K, store.kind)
    if slice then
      -- A failed slice run again goes back to the retry set as it was, due now, history kept.
      markExtras(K)
      local id = 'restored:' .. A.claimId
      redis.call('ZADD', K.retry, clockMs(), id)
      redis.call('HSET', K.retrySlices, id, slice)
      keepForRetry(K.retryData, K.payloadsInFlight, id, cjson.decode(slice).ids)
      redis.call('DEL', K.inFlight)
    else
      -- Ids pushed again while in flight may wait at the other level now (see priority.lua).
      local restored = store.kind ~= 'list' and store.inFlightIds(K.inFlight)
      store.restore(R, K.inFlight, K.inFlightMark)
      if restored then oneCopy(store.kind, K, restored, 1, #restored) end
    end
    -- Tickets and data go back in front of the waiting ones of the level the slice came from.
    untrackAll(R.tracked, K.trackedInFlight)
    unclaimAllPayloads(R.payloads, K.payloadsInFlight)
    redis.call('DEL', K.inFlightMark, K.inFlightSlice, K.inFlightHigh)
  else
    -- 'recover', a run's first claim: what a dead run left in flight, in any of its lanes
    -- (lane n's keys are lane 0's followed by ':n'). One EXISTS tells whether there is anything
    -- at all (rarely): every run starts here. Lanes other than 0 are looked at only while a run
    -- with lanes has marked the key (K.lanes; see keys.ts).
    if not quiet and redis.call('EXISTS', unpack(recoverable(K))) > 0 then
      recoverLane(store, K, A, K, 0)
      if redis.call('EXISTS', K.lanes) == 1 then
        for lane = 1, OTHER_LANES do recoverLane(store, K, A, keyNames(K.base, lane), lane) end
        redis.call('DEL', K.lanes)
      end
    end
  end
  return nil
end

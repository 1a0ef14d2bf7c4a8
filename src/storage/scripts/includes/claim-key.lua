-- A claim of one key, for the holder of its lock (`store`: its store's side, see stores.lua; K:
-- its names, see keyNames; A: the claim's arguments, as claim.lua takes them, see args.ts):
-- settles the previous slice, then claims the next one. claim.lua and claim-and-finish.lua run it
-- for their caller's key; fused-claim.lua for the key of a job just fetched. `finish`, when given
-- and the run ends here (nothing claimed, nothing due later), completes the run's BullMQ job and
-- returns BullMQ's reply (claim-and-finish.lua).
--
-- Returns {REPLY.ok, waitMs, slice, waited, payloads, settled, finished, traces, id...}
--   (CLAIM_REPLY_HEAD fields, then the ids): a due failed slice (its JSON as `slice`, its ids
--   alone), or else pending ids ('' as `slice`); `waited` is how long the slice's mark is old, -1
--   without one; `payloads` the JSON object of the claimed ids' data (see payloads.lua), '' without;
--   `settled` the tickets whose last id the ack settled and that want a callback, space-separated
--   ('' for none); `finished` BullMQ's moveToFinished reply when this call completed the job, else
--   ''; `traces` the JSON object of the claimed pending ids' trace context (see traces.lua; a
--   failed slice's is in its JSON), '' without; when nothing is claimed, waitMs is how long until
--   something is due (0: nothing left at all; -1: paused until resumed), a wait to fill included
-- {REPLY.lockNotHeld, pttl}: the lock is held with another value, for pttl ms (-1: no TTL; -2:
--   it was not held at all and A.takeLock is false)
--- @include "clock"
--- @include "tracking"
--- @include "payloads"
--- @include "traces"
--- @include "settle-previous"
--- @include "flow"
--- @include "due"
--- @include "priority"
--- @include "fill"
local function claimKey(store, K, A, finish)
  -- This key's own: a call that claims for two keys (a completion that fetches) lists only the
  -- second one's in the second reply.
  local log = ticketLog()
  -- Almost always the key has no extras (a pause or hold, failed slices, tickets, data: see
  -- extras.lua), nor, at a run's first claim, anything a dead run left: one call spares the reads
  -- each would need (`quiet`). A restore changes the extras (its ids go back, with their tickets
  -- and data), so it asks after settling.
  local quiet
  if A.settle == 'recover' then
    -- The extras stand for the rest a dead run may leave (see extras.lua): a failed slice in
    -- flight, its tickets and data, the lanes mark; an in-flight mark never outlives its ids.
    quiet = redis.call('EXISTS', K.extras, K.inFlight) == 0
  elseif A.settle == 'ack' then
    quiet = redis.call('EXISTS', K.extras) == 0
  end
  local early = settlePrevious(store, K, A, log, quiet)
  if early then return early end

  local asked
  if A.holdMs > 0 then
    markExtras(K)
    asked = holdAfter(K.hold, K.retryAfterStreak, A.holdMs, A.settle == 'restore')
  end
  local plain = quiet or redis.call('EXISTS', K.extras) == 0

  local result = {REPLY.ok, 0, '', -1, '', table.concat(log.settled, ' '), '', ''}
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
    local ids, mark, retried
    -- A dead run's slices in this lane must be found by the next run's first claim: the marks go
    -- first, so that no error later in this call (Redis keeps what a script wrote) leaves the
    -- lane's ids in flight without them.
    if A.lane > 0 then markLanes(K) end
    -- The retry set, when it exists, is almost always empty: one ZCARD spares the lookups below.
    local retrying = plain and 0 or redis.call('ZCARD', K.retry)
    local due = retrying > 0 and redis.call('ZRANGEBYSCORE', K.retry, '-inf', clockMs(), 'LIMIT', 0, 1)[1]
    local slice = due and redis.call('HGET', K.retrySlices, due)
    local decoded = slice and cjson.decode(slice)
    if decoded and allowance and #decoded.ids > allowance and allowance < rateMax then
      -- A failed slice runs again whole: it waits until the window has room for all of it.
      limited = select(2, rateAllowance(K.rateLog, K.rateUsed, rateMax, window, math.min(#decoded.ids, rateMax)))
    elseif due then
      retried = due
      retrying = retrying - 1
      redis.call('ZREM', K.retry, due)
      redis.call('HDEL', K.retrySlices, due)
      if decoded then
        ids = decoded.ids
        mark = clockMs()
        store.toInFlight(K, ids, mark)
        redis.call('SET', K.inFlightMark, mark)
        -- Kept with the ids in flight: if the run dies, the slice's history survives it.
        redis.call('SET', K.inFlightSlice, slice)
        result[3] = slice
      end
    end
    local blocked = retrying >= MAX_RETRYING_SLICES
    -- Pending ids that wait to fill stay where they are (see fill.lua); high ones never wait (see
    -- priority.lua).
    local filling = (not ids and not blocked and not limited) and fillWait(store.kind, K, A.fillMin, A.fillMaxWaitMs) or 0
    -- The names of the level the ids come from, for their tickets and data (see priority.lua).
    local L = K
    if not ids and not blocked and not limited then
      ids, mark, L = takeByLevel(store, K, count, plain, filling > 0)
    end
    if ids and #ids > 0 then
      if not plain then
        trackClaim(L.tracked, K.trackedInFlight, ids, store.perPush)
        -- A failed slice's data waits with it (see payloads.lua), never with the ids pushed since.
        if retried then
          result[5] = claimRetryPayloads(K.retryData, K.payloadsInFlight, retried, ids)
        else
          result[5] = claimPayloads(L.payloads, K.payloadsInFlight, ids, store.perPush)
          result[8] = claimTraces(K.traces, ids)
        end
      end
      if rateMax > 0 then rateSpend(K.rateLog, K.rateUsed, #ids, window) end
      if mark then result[4] = math.max(0, clockMs() - tonumber(mark)) end
      for i = 1, #ids do result[CLAIM_REPLY_HEAD + i] = ids[i] end
    elseif not limited then
      -- Nothing taken: a list's or set's pending is empty (or the key is blocked, or its ids wait
      -- to fill), so only a zset's pending (of either level), or the wait to fill, can still say when.
      local skip = blocked or store.kind ~= 'zset'
      local due = withHighDue(store.kind, K, filledDueAt(store.kind, K, filling, skip, retrying), skip, plain)
      if due then result[2] = math.max(1, due - clockMs()) end
    end
  end
  if held then result[2] = held end
  -- A settle that holds the key (count 0) tells how long.
  if asked then result[2] = asked end
  if limited then
    result[2] = limited
    -- Held too, so pushes meanwhile leave its delayed job where it is (see push.lua).
    markExtras(K)
    holdFor(K.hold, limited)
  end

  if A.releaseIfEmpty and count > 0 and #result == CLAIM_REPLY_HEAD then
    redis.call('DEL', K.lock, K.lastClaim)
    if not plain then dropExtrasIfNone(K) end
    -- Nothing left and nothing due later: the run is over, and so is its job.
    if finish and result[2] == 0 then result[7] = finish() end
    return result
  end
  -- Remembered (with its waitMs) as long as the lock could live, so a resent claim changes
  -- nothing and gets the same reply; another run's claim ids never match it. A claim made by a
  -- fetch is never resent (see fused-claim.lua).
  if not A.once then redis.call('SET', K.lastClaim, A.claimId .. '|' .. result[2], 'PX', A.lockTtlMs) end
  return result
end

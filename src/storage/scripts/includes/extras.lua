-- The key's extras mark (K.extras; see keys.ts): every call that writes one of the key's uncommon
-- keys (a pause, a hold and its retryAfter streak, failed slices and their data, tickets, data,
-- trace context, the mark of a run with lanes, high-priority ids) sets it, so a claim or push that finds it
-- absent reads none of them. A key that uses none of those then costs one name looked up where it
-- cost up to ten: the lookups of names that do not exist were the largest part of Redis's own
-- work in a perf profile of one-id keys.

local function markExtras(K) redis.call('SET', K.extras, '1') end

-- A run with lanes marks the key (K.lanes, one of its extras), so that the next run's first claim
-- looks for what a dead run left in lanes other than 0: both marks in one call.
local function markLanes(K) redis.call('MSET', K.extras, '1', K.lanes, '1') end

-- Drops the mark once none of the keys it stands for exists (a hold has expired, the last ticket
-- settled): a run's end asks, its last claim's or its release's, once its slices are settled.
-- (Lanes other than 0 are never looked at: while any of theirs may exist, so does the lanes mark.)
local function dropExtrasIfNone(K)
  -- Trace context outlives its ids only when a claim did not take it (a worker of an earlier
  -- version, during a rolling deploy): once nothing waits, what is left is of no id.
  if redis.call('EXISTS', K.traces) == 1 and redis.call('EXISTS', K.pending, K.pendingHigh) == 0 then redis.call('DEL', K.traces) end
  if redis.call('EXISTS', K.paused, K.hold, K.retryAfterStreak, K.retry, K.retrySlices, K.retryData, K.tracked, K.trackedInFlight, K.payloads, K.payloadsInFlight, K.traces, K.inFlightSlice, K.lanes, K.pendingHigh, K.inFlightHigh, K.trackedHigh, K.payloadsHigh) == 0 then
    -- No high id waits: a high push mark left (one a claim of exactly the rest did not drop) is stale.
    redis.call('DEL', K.extras, K.pushMarksHigh)
  end
end

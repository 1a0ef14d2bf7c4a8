-- The key's extras mark (K.extras; see keys.ts): every call that writes one of the key's uncommon
-- keys (a pause, a hold and its retryAfter streak, failed slices and their data, tickets, data)
-- sets it first, so a claim or push that finds it absent reads none of them. A key that uses
-- none of those then costs one name looked up where it cost up to ten: the lookups of names that
-- do not exist were the largest part of Redis's own work in a perf profile of one-id keys.

local function markExtras(K) redis.call('SET', K.extras, '1') end

-- Drops the mark of a single-lane key once none of the keys it stands for exists (a hold has
-- expired, the last ticket settled): the run's last claim, whose slice is settled, asks.
local function dropExtrasIfNone(K)
  if redis.call('EXISTS', K.paused, K.hold, K.retryAfterStreak, K.retry, K.retrySlices, K.retryData, K.tracked, K.trackedInFlight, K.payloads, K.payloadsInFlight) == 0 then
    redis.call('DEL', K.extras)
  end
end

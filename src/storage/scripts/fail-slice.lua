--[[
  Settles a slice whose handler failed, for the holder of the key's lock: each part goes to the
  retry set, due after its backoff, or is counted dead (its dead letter is written beforehand,
  in the batcher's own slot). The key's other pending ids stay claimable meanwhile. A retried
  part's data waits with the part (the key's retry data); a dead id's went with its letter, so
  it is dropped here (see includes/payloads.lua). With `ack` (a handler that reported only some
  of its ids failed, `ctx.fail`), the slice's other ids succeeded: they are acked here, in the same
  call, as a claim acks a slice (their tickets count them done, their data is dropped).

  KEYS[1] the key's base name: every name of the key is derived from it (see keys.ts)
  ARGV    by name, generated from storage/scripts/args.ts (`fail-slice`):
    lock      the lock value
    plan      JSON { retry: [{ id, delayMs, slice }], dead: { ids, message, messages? }, ack? },
              where `slice` is the JSON stored for the part (it holds the part's ids as `ids`),
              each ticket of a dead id records { id, message } (`messages[i]`, when given, for
              ids[i]), and `ack` (true or absent) acks the slice's ids in neither
    maxTicketErrors  errors kept per ticket
    settleId  unique per failed slice: a resent call (ioredis resends after a reconnect) changes
              nothing, so it cannot bring back a part another lane has claimed since
    lane      the slice's lane (0 for a single-lane run; see keys.ts LANE_NAMES)

  Returns {REPLY.ok, settled}: done, `settled` the tickets whose last id died (or was acked) here
  and that want a callback, space-separated; {REPLY.lockNotHeld, ''}: the lock is not held with
  this value (nothing changed)
]]
--- @include "args-fail-slice"
--- @include "keyspace"
--- @include "clock"
--- @include "tracking"
--- @include "payloads"
--- @include "extras"
local A = failSliceArgs()
local K = keyNames(KEYS[1], A.lane)
if redis.call('GET', K.lock) ~= A.lock then return {REPLY.lockNotHeld, ''} end
if redis.call('GET', K.lastClaim) == A.settleId then return {REPLY.ok, ''} end
redis.call('SET', K.lastClaim, A.settleId, 'PX', math.max(1, redis.call('PTTL', K.lock)))
local plan = cjson.decode(A.plan)
local log = ticketLog()
local now = clockMs()
if #plan.retry > 0 then markExtras(K) end

for _, part in ipairs(plan.retry) do
  redis.call('ZADD', K.retry, now + part.delayMs, part.id)
  redis.call('HSET', K.retrySlices, part.id, part.slice)
  local ids = cjson.decode(part.slice).ids
  for _, id in ipairs(ids) do untrackOne(K.tracked, K.trackedInFlight, id) end
  keepForRetry(K.retryData, K.payloadsInFlight, part.id, ids)
end
if redis.call('EXISTS', K.trackedInFlight) == 1 then
  local messages = plan.dead.messages
  for i, id in ipairs(plan.dead.ids) do
    local error = cjson.encode({ id = id, message = messages and messages[i] or plan.dead.message })
    creditOne(log, K.trackedInFlight, K.ticketPrefix, K.settledTickets, id, 'failed', error, A.maxTicketErrors)
  end
end
if plan.ack then
  -- What is still tracked in flight is the ids that succeeded. Some of the slice succeeded, so a
  -- streak of retryAfter asks ends, as on a claim's ack (see settle-previous.lua).
  creditAll(log, K.trackedInFlight, K.ticketPrefix, K.settledTickets, 'done')
  redis.call('DEL', K.retryAfterStreak)
end
-- The slice is settled whole (its acked ids' data goes here): nothing of it stays in flight (an in-flight mark never outlives its ids).
redis.call('DEL', K.inFlight, K.trackedInFlight, K.payloadsInFlight, K.inFlightMark, K.inFlightSlice, K.inFlightHigh)
return {REPLY.ok, table.concat(log.settled, ' ')}

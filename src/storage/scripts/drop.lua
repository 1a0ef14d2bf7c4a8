--[[
  Drops a key's whole backlog (an operator's `drop`), in one step: its pending ids at both levels,
  the slices in flight in every lane, the failed slices backing off, their data, trace context and
  marks, and the key's lock. Deleting the lock is the fence: every write of a run (a claim, its
  ack or restore, a failed slice's settle, a release, a renewal) is checked against the lock's
  value, so a run that held the key finds it lost at its next call and brings nothing back; its
  slice in flight is abandoned (its handler runs on, its ids are not run again). Each dropped id
  counts as `dropped` on its tickets, which settle as an ack settles them (see tracking.lua). A
  pause is kept: it is an operator's decision about the key, not part of its backlog; so are the
  rate limit's window and the outbox of settled tickets (this call may add to it). A hold (a
  rate limit's or a retryAfter's wait) and its retryAfter streak go with the backlog they held:
  a push after the drop starts at once, within the rate window kept.

  KEYS[1] the key's base name: every name of the key is derived from it (see keys.ts)
  KEYS[2] (standalone only) the key's job pointer (keys.ts jobPointerOf): deleted here, so that a
          push after this call adds a job of its own
  KEYS[3] (standalone only) the recovery index of the key's shard: its entry is removed here
  ARGV[1] the store: 'list' | 'set' | 'zset'
  ARGV[2] the key (its member in the index)

  Returns {pending, inFlight, retrying, tickets, settled, jobId}: the ids removed waiting (both
  levels), in flight (every lane) and backing off; how many tickets counted ids as dropped;
  `settled` the tickets this call settled that want a callback, space-separated ('' for none);
  `jobId` the job the pointer named ('' for none, and on a Cluster).
]]
--- @include "keyspace"
--- @include "tracking"
local K = keyNames(KEYS[1], 0)
local size = ARGV[1] == 'list' and 'LLEN' or ARGV[1] == 'set' and 'SCARD' or 'ZCARD'
local log, touched = ticketLog(), {}

local pending = redis.call(size, K.pending) + redis.call(size, K.pendingHigh)
local retrying = 0
for _, slice in ipairs(redis.call('HVALS', K.retrySlices)) do retrying = retrying + #cjson.decode(slice).ids end
-- A failed slice's ids keep their tickets in `tracked` while they back off (see fail-slice.lua).
dropTracked(log, K.tracked, K.ticketPrefix, touched)
dropTracked(log, K.trackedHigh, K.ticketPrefix, touched)
local inFlight = 0
for lane = 0, OTHER_LANES do
  local L = lane == 0 and K or keyNames(K.base, lane)
  inFlight = inFlight + redis.call(size, L.inFlight)
  dropTracked(log, L.trackedInFlight, K.ticketPrefix, touched)
  redis.call('DEL', L.inFlight, L.lastClaim, L.inFlightMark, L.inFlightSlice, L.payloadsInFlight, L.inFlightHigh)
end
redis.call('DEL', K.pending, K.pendingHigh, K.pushMarks, K.pushMarksHigh, K.retry, K.retrySlices, K.retryData,
  K.payloads, K.payloadsHigh, K.traces, K.hold, K.retryAfterStreak, K.lanes, K.lock)
-- The mark stands for the key's uncommon keys (see extras.lua): of those, only a pause is left.
if redis.call('EXISTS', K.paused) == 0 then redis.call('DEL', K.extras) end

local tickets = 0
for ticket in pairs(touched) do
  tickets = tickets + 1
  settleTicket(log, K.ticketPrefix .. ticket, ticket, K.settledTickets)
end

local jobId = ''
if KEYS[2] then
  jobId = redis.call('GET', KEYS[2]) or ''
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[3], ARGV[2])
end
return {pending, inFlight, retrying, tickets, table.concat(log.settled, ' '), jobId}

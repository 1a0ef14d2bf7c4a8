--[[
  Settles a slice whose handler failed, for the holder of the key's lock: each part goes to the
  retry set, due after its backoff, or is counted dead (its dead letter is written beforehand,
  in the batcher's own slot). The key's other pending ids stay claimable meanwhile.

  KEYS[1] in-flight ids       KEYS[2] lock
  KEYS[3] retry (sorted set of failed slices, scored by when they are due)
  KEYS[4] retry slices (hash: slice id -> JSON)
  KEYS[5] tracked ids waiting KEYS[6] tracked ids in flight
  KEYS[7] ticket prefix (ticket hashes are named from it, in this key's hash slot)
  KEYS[8] id of the last claim (or settle) applied in this lane
  KEYS[9] data per id waiting KEYS[10] data per id in flight (see includes/payloads.lua): a
          retried part's data waits with the part (KEYS[12]); a dead id's goes with its letter
          (written beforehand), so it is dropped here
  KEYS[11] the key's outbox of settled tickets (see includes/tracking.lua)
  KEYS[12] the key's retry data (failed slices' payloads, by slice and id)
  ARGV[1] lock value
  ARGV[2] JSON { retry: [{ id, delayMs, slice }], dead: { ids, message } }, where `slice` is
          the JSON stored for the part (it holds the part's ids as `ids`), and each ticket of a
          dead id records { id, message }
  ARGV[3] errors kept per ticket
  ARGV[4] settle id, unique per failed slice: a resent call (ioredis resends after a reconnect)
          changes nothing, so it cannot bring back a part another lane has claimed since

  Returns {1, settled}: done, `settled` the tickets whose last id died here and that want a
  callback, space-separated; {-1, ''}: the lock is not held with this value (nothing changed)
]]
--- @include "clock"
--- @include "tracking"
--- @include "payloads"
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return {-1, ''} end
if redis.call('GET', KEYS[8]) == ARGV[4] then return {1, ''} end
redis.call('SET', KEYS[8], ARGV[4], 'PX', math.max(1, redis.call('PTTL', KEYS[2])))
local plan = cjson.decode(ARGV[2])
local now = clockMs()

for _, part in ipairs(plan.retry) do
  redis.call('ZADD', KEYS[3], now + part.delayMs, part.id)
  redis.call('HSET', KEYS[4], part.id, part.slice)
  local ids = cjson.decode(part.slice).ids
  for _, id in ipairs(ids) do untrackOne(KEYS[5], KEYS[6], id) end
  keepForRetry(KEYS[12], KEYS[10], part.id, ids)
end
if redis.call('EXISTS', KEYS[6]) == 1 then
  for _, id in ipairs(plan.dead.ids) do
    local error = cjson.encode({ id = id, message = plan.dead.message })
    creditOne(KEYS[6], KEYS[7], KEYS[11], id, 'failed', error, tonumber(ARGV[3]))
  end
end
redis.call('DEL', KEYS[1], KEYS[6], KEYS[10])
return {1, table.concat(settledTickets, ' ')}

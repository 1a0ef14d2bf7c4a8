-- The start of every claim script: fencing, idempotency, and settling the previous slice.
-- (KEYS[2] in-flight, KEYS[3] lock, KEYS[4] last claim id, KEYS[5] failures; ARGV[1] lock value,
-- ARGV[2] claim id, ARGV[3] 'ack' | 'restore'.) Returns the reply to send at once, or nil to go on:
-- {-1} when the caller does not hold the lock; {1, 0, id...} when this claim was already applied.
local function settlePrevious(inFlightIds, restore)
  if redis.call('GET', KEYS[3]) ~= ARGV[1] then return {-1} end
  if redis.call('GET', KEYS[4]) == ARGV[2] then
    local ids = inFlightIds()
    table.insert(ids, 1, 0)
    table.insert(ids, 1, 1)
    return ids
  end
  if ARGV[3] == 'ack' then
    redis.call('DEL', KEYS[2], KEYS[5])
  else
    restore()
  end
  return nil
end

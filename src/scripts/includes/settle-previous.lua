-- The start of every claim script: fencing, idempotency, and settling the previous slice.
-- (KEYS as in claim-body.) Returns the reply to send at once, or nil to go on:
-- {-1} when the caller does not hold the lock; {1, 0, '', id...} when this claim was already applied.
local function settlePrevious(store)
  if redis.call('GET', KEYS[3]) ~= ARGV[1] then return {-1} end
  if redis.call('GET', KEYS[4]) == ARGV[2] then
    local ids = store.inFlightIds()
    table.insert(ids, 1, '')
    table.insert(ids, 1, 0)
    table.insert(ids, 1, 1)
    return ids
  end
  if ARGV[3] == 'ack' then
    redis.call('DEL', KEYS[2])
    creditAll(KEYS[8], KEYS[9], 'done')
  else
    store.restore(KEYS[2], KEYS[11])
    untrackAll(KEYS[7], KEYS[8])
    -- A run's first claim also restores what any other lane of a crashed run left in flight
    -- (lane n's keys are lane 0's followed by ':n'), however many lanes that run had.
    for lane = 1, tonumber(ARGV[6]) do
      local inFlight, mark = KEYS[2] .. ':' .. lane, KEYS[11] .. ':' .. lane
      if redis.call('EXISTS', inFlight) == 1 then store.restore(inFlight, mark) end
      untrackAll(KEYS[7], KEYS[8] .. ':' .. lane)
      redis.call('DEL', mark)
    end
  end
  redis.call('DEL', KEYS[11])
  return nil
end

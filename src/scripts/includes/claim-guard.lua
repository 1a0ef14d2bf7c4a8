-- Fencing and idempotency for the claim scripts (KEYS[3] lock, KEYS[4] last claim id;
-- ARGV[1] lock value, ARGV[2] claim id). Returns the reply to send at once, or nil to go on:
-- {-1} when the caller does not hold the lock; {1, 0, id...} when this claim was already applied.
local function claimGuard(inFlightIds)
  if redis.call('GET', KEYS[3]) ~= ARGV[1] then return {-1} end
  if redis.call('GET', KEYS[4]) == ARGV[2] then
    local ids = inFlightIds()
    table.insert(ids, 1, 0)
    table.insert(ids, 1, 1)
    return ids
  end
  return nil
end

-- The start of every claim script: fencing, idempotency, and settling the previous slice.
-- (KEYS as in claim-body.) Returns the reply to send at once, or nil to go on:
-- {-1, pttl} when the caller does not hold the lock (and cannot take it, see ARGV[8]); when this
-- claim was already applied, its reply again: {1, waitMs, slice, -1, payloads, '', id...} (the claim id is remembered with its waitMs,
-- `claimId|waitMs`, and a failed slice's JSON is kept in flight with it).

-- A slice a dead run left in flight counts as a failed run of it (a poison id that kills its
-- worker must still reach the dead letters): it becomes a failed slice, due now, one attempt on.
local function recoverLane(store, inFlight, trackedInFlight, mark, sliceKey, payloadsInFlight, lane)
  local ids = store.inFlightIds(inFlight)
  if #ids > 0 then
    local previous = redis.call('GET', sliceKey)
    local slice = previous and cjson.decode(previous) or { attempts = 0, isolating = false }
    local now = clockMs()
    slice.ids = ids
    slice.attempts = slice.attempts + 1
    slice.firstFailedAt = slice.firstFailedAt or now
    slice.crashed = true
    local id = 'crashed:' .. ARGV[2] .. ':' .. lane
    redis.call('ZADD', KEYS[5], now, id)
    redis.call('HSET', KEYS[6], id, cjson.encode(slice))
    redis.call('DEL', inFlight)
  end
  untrackAll(KEYS[7], trackedInFlight)
  unclaimAllPayloads(KEYS[16], payloadsInFlight)
  redis.call('DEL', mark, sliceKey)
end

-- Holds the lock with ARGV[1], taking it if it is free and ARGV[8] asks; also returns the last
-- claim applied while held. (GET, not MGET: a lock key of another type must fail loudly.)
local function holdLock()
  local holder = redis.call('GET', KEYS[3])
  if holder == ARGV[1] then return true, redis.call('GET', KEYS[4]) end
  if holder or ARGV[8] ~= '1' then return false end
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[7])
  return true, nil
end

local function settlePrevious(store)
  local held, last = holdLock()
  if not held then return {-1, redis.call('PTTL', KEYS[3])} end
  local applied = ARGV[2] .. '|'
  if last and string.sub(last, 1, #applied) == applied then
    local ids = store.inFlightIds(KEYS[2])
    table.insert(ids, 1, '')
    table.insert(ids, 1, inFlightPayloads(KEYS[17]))
    table.insert(ids, 1, -1)
    table.insert(ids, 1, redis.call('GET', KEYS[12]) or '')
    table.insert(ids, 1, tonumber(string.sub(last, #applied + 1)))
    table.insert(ids, 1, 1)
    return ids
  end
  if ARGV[3] == 'ack' then
    redis.call('DEL', KEYS[2], KEYS[11], KEYS[12], KEYS[17])
    creditAll(KEYS[8], KEYS[9], KEYS[18], 'done')
  elseif ARGV[3] == 'restore' then
    local slice = redis.call('GET', KEYS[12])
    if slice then
      -- A failed slice run again goes back to the retry set as it was, due now, history kept.
      local id = 'restored:' .. ARGV[2]
      redis.call('ZADD', KEYS[5], clockMs(), id)
      redis.call('HSET', KEYS[6], id, slice)
      redis.call('DEL', KEYS[2])
    else
      store.restore(KEYS[2], KEYS[11])
    end
    untrackAll(KEYS[7], KEYS[8])
    unclaimAllPayloads(KEYS[16], KEYS[17])
    redis.call('DEL', KEYS[11], KEYS[12])
  else
    -- 'recover', a run's first claim: what a dead run left in flight, in any of its lanes
    -- (lane n's keys are lane 0's followed by ':n'), however many lanes it had. One EXISTS
    -- tells whether there is anything at all (rarely): every run starts here.
    local lanes = {KEYS[2], KEYS[8], KEYS[11], KEYS[12], KEYS[17]}
    for lane = 1, tonumber(ARGV[6]) do lanes[#lanes + 1] = KEYS[2] .. ':' .. lane end
    if redis.call('EXISTS', unpack(lanes)) > 0 then
      recoverLane(store, KEYS[2], KEYS[8], KEYS[11], KEYS[12], KEYS[17], 0)
      for lane = 1, tonumber(ARGV[6]) do
        local n = ':' .. lane
        recoverLane(store, KEYS[2] .. n, KEYS[8] .. n, KEYS[11] .. n, KEYS[12] .. n, KEYS[17] .. n, lane)
      end
    end
  end
  return nil
end

-- Bulk progress: which tickets each tracked id counts for. A value is the tickets of the id's
-- pushes, space-separated, oldest first (a ticket appears once per push of the id).
-- Untracked keys pay one EXISTS per call.

-- Moves claimed ids' tickets from waiting to in flight. A list claims one push of an id at a
-- time (`perPush`); a set or zset claims every push of it at once (they were deduplicated).
local function trackClaim(tracked, trackedInFlight, ids, perPush)
  if redis.call('EXISTS', tracked) == 0 then return end
  for _, id in ipairs(ids) do
    local tickets = redis.call('HGET', tracked, id)
    if tickets then
      local moved, rest = tickets, ''
      if perPush then moved, rest = string.match(tickets, '^(%S+) ?(.*)$') end
      if rest == '' then redis.call('HDEL', tracked, id) else redis.call('HSET', tracked, id, rest) end
      local already = redis.call('HGET', trackedInFlight, id)
      redis.call('HSET', trackedInFlight, id, already and (already .. ' ' .. moved) or moved)
    end
  end
end

-- Puts an in-flight id's tickets back in front of its waiting ones.
local function untrackOne(tracked, trackedInFlight, id)
  local tickets = redis.call('HGET', trackedInFlight, id)
  if not tickets then return end
  local waiting = redis.call('HGET', tracked, id)
  redis.call('HSET', tracked, id, waiting and (tickets .. ' ' .. waiting) or tickets)
  redis.call('HDEL', trackedInFlight, id)
end

local function untrackAll(tracked, trackedInFlight)
  for _, id in ipairs(redis.call('HKEYS', trackedInFlight)) do untrackOne(tracked, trackedInFlight, id) end
end

-- Counts an in-flight id as `field` ('done' or 'failed') on each of its tickets that has not
-- expired; with an error, records it too (at most maxErrors per ticket).
local function creditOne(trackedInFlight, ticketPrefix, id, field, errorJson, maxErrors)
  local tickets = redis.call('HGET', trackedInFlight, id)
  if not tickets then return end
  for ticket in string.gmatch(tickets, '%S+') do
    local hash = ticketPrefix .. ticket
    if redis.call('EXISTS', hash) == 1 then
      redis.call('HINCRBY', hash, field, 1)
      if errorJson then
        local errors = hash .. ':errors'
        if redis.call('LLEN', errors) < maxErrors then
          redis.call('RPUSH', errors, errorJson)
          redis.call('PEXPIRE', errors, redis.call('PTTL', hash))
        end
      end
    end
  end
  redis.call('HDEL', trackedInFlight, id)
end

local function creditAll(trackedInFlight, ticketPrefix, field)
  if redis.call('EXISTS', trackedInFlight) == 0 then return end
  for _, id in ipairs(redis.call('HKEYS', trackedInFlight)) do creditOne(trackedInFlight, ticketPrefix, id, field) end
end

-- Bulk progress: which tickets each tracked id counts for. A value is the tickets of the id's
-- pushes, space-separated, oldest first (a ticket appears once per push of the id).
-- Untracked keys pay one EXISTS per call.
--- @include "keyspace"

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

-- What one call (or, in a call that claims for two keys, one key's claim) did to tickets: `settled`,
-- the tickets it settled that want a callback (its reply lists them, see settleTicket), and
-- `announced`, those it has told of (one message per ticket, however many of its ids it counts).
-- Each caller makes its own and hands it to the functions below, which keep no state of their own.
local function ticketLog() return { settled = {}, announced = {} } end

-- Tells a `waitFor` in any process that a ticket's counts changed: a message on its key's ticket
-- channel (the ticket prefix followed by TICKET_CHANNEL_SUFFIX) carrying the ticket's id. It
-- carries no counts: the listener reads them after this call, so it sees all of the call's
-- changes. Pub/sub is at most once, so listeners also read on a timer (see ticket-channel.ts).
-- `pcall`: a user the ACL denies the channel still gets every write of the call; the waiter
-- then learns of the change by its timer.
local function announceTicket(log, ticketPrefix, ticket)
  if log.announced[ticket] then return end
  log.announced[ticket] = true
  redis.pcall('PUBLISH', ticketPrefix .. TICKET_CHANNEL_SUFFIX, ticket)
end

-- A ticket settles when its every id is done, failed or dropped (an operator's `drop`), once it
-- is sealed (an open ticket is not, until sealTicket): exactly once (HSETNX `settled`), whichever
-- call counts its last id.
-- A ticket that asked for a callback (`cb`) goes to the key's outbox in that same call, for a
-- worker to turn into the callback's BullMQ job (see tickets.ts): a crash after this call
-- leaves it in the outbox, never lost. Its status lives `ttl` ms more from now.
local function settleTicket(log, hash, ticket, outbox)
  local t = redis.call('HMGET', hash, 'total', 'done', 'failed', 'sealed', 'ttl', 'cb', 'dropped')
  if not t[1] or t[4] == '0' then return false end
  if tonumber(t[1]) ~= tonumber(t[2] or 0) + tonumber(t[3] or 0) + tonumber(t[7] or 0) then return false end
  if redis.call('HSETNX', hash, 'settled', '1') == 0 then return false end
  if t[6] == '1' then
    redis.call('RPUSH', outbox, ticket)
    log.settled[#log.settled + 1] = ticket
  end
  if t[5] then
    redis.call('PEXPIRE', hash, t[5])
    redis.call('PEXPIRE', hash .. TICKET_ERRORS_SUFFIX, t[5])
  end
  return true
end

-- Counts an in-flight id as `field` ('done' or 'failed') on each of its tickets that has not
-- expired; with an error, records it too (at most maxErrors per ticket).
local function creditOne(log, trackedInFlight, ticketPrefix, outbox, id, field, errorJson, maxErrors)
  local tickets = redis.call('HGET', trackedInFlight, id)
  if not tickets then return end
  for ticket in string.gmatch(tickets, '%S+') do
    local hash = ticketPrefix .. ticket
    if redis.call('EXISTS', hash) == 1 then
      redis.call('HINCRBY', hash, field, 1)
      announceTicket(log, ticketPrefix, ticket)
      if errorJson then
        local errors = hash .. TICKET_ERRORS_SUFFIX
        if redis.call('LLEN', errors) < maxErrors then
          redis.call('RPUSH', errors, errorJson)
          redis.call('PEXPIRE', errors, redis.call('PTTL', hash))
        end
      end
      settleTicket(log, hash, ticket, outbox)
    end
  end
  redis.call('HDEL', trackedInFlight, id)
end

local function creditAll(log, trackedInFlight, ticketPrefix, outbox, field)
  if redis.call('EXISTS', trackedInFlight) == 0 then return end
  for _, id in ipairs(redis.call('HKEYS', trackedInFlight)) do creditOne(log, trackedInFlight, ticketPrefix, outbox, id, field) end
end

-- Counts every id a tracked hash (`tracked`: waiting, `trackedInFlight`: in flight) holds as
-- dropped on each of its tickets that has not expired, once per push of the id as an ack counts it
-- done, and deletes the hash: an operator's `drop` of the key (drop.lua). `touched` collects the
-- tickets counted, for the caller to settle once every hash of the key is counted (a ticket with
-- ids in several of them settles once, on its last count).
local function dropTracked(log, tracked, ticketPrefix, touched)
  if redis.call('EXISTS', tracked) == 0 then return end
  for _, tickets in ipairs(redis.call('HVALS', tracked)) do
    for ticket in string.gmatch(tickets, '%S+') do
      local hash = ticketPrefix .. ticket
      if redis.call('EXISTS', hash) == 1 then
        redis.call('HINCRBY', hash, 'dropped', 1)
        announceTicket(log, ticketPrefix, ticket)
        touched[ticket] = true
      end
    end
  end
  redis.call('DEL', tracked)
end

--[[
  Stores one push of ids for a key, whole (a push is all or nothing), and tells whether the key's
  job must be added: not when a run holds the key's lock (its next claim sees these ids: a run
  drops the lock only in the claim that finds nothing, or before it requeues its job) nor when
  the key's job is waiting to start, nor while the key is paused until resumed (resume adds the
  job). So a push to a busy key costs this one call. A key paused for a while, or held by a rate
  limit or a retryAfter, has nothing due before that ends: waitMs says so, and the job added
  (or moved) waits as long.

  KEYS[1] pending ids           KEYS[2] push marks (lag; see includes/store-list.lua)
  KEYS[3] the key's lock        KEYS[4] retry (failed slices, scored by when they are due)
  KEYS[5] tracked ids waiting (hash: id -> tickets, space-separated)
  KEYS[6] the ticket's hash (total, done, failed); unused when untracked
  KEYS[7] paused (by an operator)   KEYS[8] hold (a rate limit, a retryAfter; see includes/flow.lua)
  KEYS[9] data per id waiting (see includes/payloads.lua)
  Standalone Redis only (on a Cluster these live in other slots and are written separately):
  KEYS[10] index of keys with recent pushes (recovery sweeps it)
  KEYS[11] BullMQ's deduplication key of the key's job (holds the job id)
  KEYS[12] BullMQ's active list   KEYS[13] BullMQ's delayed set
  KEYS[14] BullMQ's key prefix (a job's hash is the prefix followed by its id)
  KEYS[15..] BullMQ's addStandardJob keys, when ARGV[10] says so
  ARGV[1] store: 'list' | 'set' | 'zset'
  ARGV[2] ms until the ids are ready (zset; 0 otherwise)
  ARGV[3] ticket, '' for an untracked push      ARGV[4] ms the ticket lives
  ARGV[5] the key (its index member)            ARGV[6] the index score: now, by the pusher's clock
  ARGV[7] '' for a push without data; else how its payloads are kept: 'list' (one per push),
          'replace', 'keep' or 'all' (see includes/payloads.lua)
  ARGV[8] with a ticket: 'new' (this push's own, sealed: its ids are all of it) or 'open' (an
          open ticket, which must exist and not be sealed yet; see seal-ticket.lua)
  ARGV[9] a new ticket wants a callback when it settles: '1' or '0' (see includes/tracking.lua)
  ARGV[10] how many of BullMQ's keys follow ours in KEYS (0: none), to add the key's job in this
          same call when it needs one and may start now (standalone; see job.ts standardAdd)
  ARGV[11..13] BullMQ's addStandardJob arguments for that job ('' without)
  ARGV[14..] ids, then (with data) as many payloads, '' for an id pushed without

  Returns {covered, waitMs, added}: covered 1 when a run or a waiting job will claim these ids (no
  job add needed), 0 otherwise; waitMs ms until the key may claim: (zset) until its earliest id or
  failed slice is due, -1 when none; for any store, at least until its pause or hold ends; added
  BullMQ's reply (the job's id) when this call added the job, else nil.
]]
--- @include "clock"
--- @include "chunked"
--- @include "flow"
--- @include "payloads"
--- @include "due"
--- @include "bullmq-add-standard-job"
local FIRST = 14
local mode = ARGV[7]
local count = mode == '' and #ARGV - FIRST + 1 or (#ARGV - FIRST + 1) / 2
local LAST = FIRST + count - 1
local kind = ARGV[1]
local now = clockMs()

if ARGV[3] ~= '' and ARGV[8] == 'open' then
  local t = redis.call('HMGET', KEYS[6], 'total', 'sealed')
  if not t[1] then return {-2, 0} end
  if t[2] ~= '0' then return {-3, 0} end
end

local waitMs = 0
if kind == 'list' then
  chunked('RPUSH', KEYS[1], ARGV, FIRST, LAST)
  -- One mark per push, consumed by claims in FIFO order.
  redis.call('RPUSH', KEYS[2], now .. ' ' .. count)
elseif kind == 'set' then
  chunked('SADD', KEYS[1], ARGV, FIRST, LAST)
  -- When pending went from empty to non-empty (a claim that empties it clears the mark).
  redis.call('SET', KEYS[2], now, 'NX')
else
  -- Ready at the Redis server's now + delay; re-adding an id moves it (debounce).
  local at = now + tonumber(ARGV[2])
  local scored = {}
  for i = FIRST, LAST do
    scored[#scored + 1] = at
    scored[#scored + 1] = ARGV[i]
  end
  chunked('ZADD', KEYS[1], scored)
  local due = dueAt('zset', KEYS[1], KEYS[4], false)
  waitMs = due and math.max(0, due - now) or -1
end

-- After the ids, whose write is the one a key of the wrong type would fail: so a push that fails
-- writes nothing (Redis does not roll a script back).
if mode ~= '' then
  for i = FIRST, LAST do storePayload(KEYS[9], ARGV[i], ARGV[i + count], mode) end
end

local ticket = ARGV[3]
if ticket ~= '' then
  for i = FIRST, LAST do
    local tickets = redis.call('HGET', KEYS[5], ARGV[i])
    redis.call('HSET', KEYS[5], ARGV[i], tickets and (tickets .. ' ' .. ticket) or ticket)
  end
  local ttl = tonumber(ARGV[4])
  -- The tracked ids live as long as their youngest ticket could.
  if redis.call('PTTL', KEYS[5]) < ttl then redis.call('PEXPIRE', KEYS[5], ttl) end
  redis.call('HINCRBY', KEYS[6], 'total', count)
  -- Without `sealed`, a ticket is sealed: a tracked push's ids are all of it.
  if ARGV[8] == 'new' then redis.call('HSET', KEYS[6], 'ttl', ttl, 'cb', ARGV[9]) end
  redis.call('PEXPIRE', KEYS[6], ttl)
end

if #KEYS >= 10 then redis.call('ZADD', KEYS[10], ARGV[6], ARGV[5]) end

local held = heldFor(KEYS[7], KEYS[8])
if held == -1 then return {1, waitMs} end
if held and held > waitMs then waitMs = held end

-- Not covered: the job is added here when the caller sent BullMQ's add and it may start now;
-- else the caller adds it (delayed, or at another level).
local OWN_KEYS, bullKeys = 14, tonumber(ARGV[10])
local function uncovered()
  if bullKeys == 0 or waitMs ~= 0 then return {0, waitMs} end
  local keys = {}
  for i = OWN_KEYS + 1, OWN_KEYS + bullKeys do keys[#keys + 1] = KEYS[i] end
  return {0, 0, bullmqAddStandardJob(keys, {ARGV[11], ARGV[12], ARGV[13]})}
end

if #KEYS < 11 then return {redis.call('EXISTS', KEYS[3]), waitMs} end
-- One read for the lock and the job's id (standalone: any keys may share a call).
local got = redis.call('MGET', KEYS[3], KEYS[11])
if got[1] then return {1, waitMs} end
-- A waiting (or prioritized) job will claim soon. An active one may be between its last claim
-- and its completion, and a delayed one may be backing off or waiting for a zset time: for them
-- the job is added (which brings a delayed job forward, or is kept as the next job of an active
-- one). A job id whose job is gone is no job.
local jobId = got[2]
if not jobId then return uncovered() end
if redis.call('LPOS', KEYS[12], jobId) or redis.call('ZSCORE', KEYS[13], jobId) then return uncovered() end
if redis.call('EXISTS', KEYS[14] .. jobId) == 1 then return {1, waitMs} end
return uncovered()

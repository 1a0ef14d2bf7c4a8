--[[
  Stores one push of ids for a key, whole (a push is all or nothing), and tells whether the key's
  job must be added: not when a run holds the key's lock (its next claim sees these ids: a run
  drops the lock only in the claim that finds nothing, or before it requeues its job) nor when
  the key's job is waiting to start, nor while the key is paused until resumed (resume adds the
  job). So a push to a busy key costs this one call. A key paused for a while, or held by a rate
  limit or a retryAfter, has nothing due before that ends, nor a key whose ids wait to fill:
  waitMs says so, and the job added (or moved) waits as long. A key waiting to fill whose job
  waits delayed already, due by then, needs nothing more (each push to it is this one call);
  the push that fills it brings its job forward.

  KEYS[1] the key's base name: its names are derived from it (see includes/keyspace, keys.ts);
          a tracked push's ticket hash is its ticket prefix followed by `ticket`
  KEYS[2] (standalone only) the batcher's recovery index: the key is listed there unless this
          call adds its job (and then too for a new ticket that wants a callback)
  ARGV    by name, generated from storage/scripts/args.ts (`push`):
    store        'list' | 'set' | 'zset'
    delayMs      ms until the ids are ready (zset; 0 otherwise)
    ticket       '' for an untracked push; ticketTtlMs: how long the ticket lives
    key          the key (its index member); indexScore: now, by the pusher's clock
    payloadMode  '' for a push without data; else how its payloads are kept: 'list' (one per
                 push), 'replace', 'keep' or 'all' (see includes/payloads.lua)
    ticketMode   with a ticket: 'new' (this push's own, sealed: its ids are all of it) or 'open'
                 (an open ticket, which must exist and not be sealed yet; see seal-ticket.lua)
    callback     a new ticket wants a callback when it settles (see includes/tracking.lua)
    queuePrefix  BullMQ's queue prefix (`prefix:name:`; standalone only, '' on a Cluster, where the
                 index, BullMQ's keys and the key's data live in other slots and the caller writes
                 the index and adds the job itself): the key's job pointer is read and written
                 under it (keys.ts JOB_POINTER), and its job read and added under the names
                 BullMQ gives them there (bullmq/lua.ts: bullmq-job, bullmq-adds, bullmq-reschedule)
    addJob       '' or which of BullMQ's adds (inlined) adds the key's job in this same call when it
                 needs one: BULLMQ_STANDARD_ADD when it may start now, BULLMQ_DELAYED_ADD (built
                 with a delay of fillMaxWaitMs) when it waits exactly that long to fill (see job.ts
                 pushAdd); or it brings the key's delayed job forward (includes/key-job.lua); else
                 the caller adds it
    addArgCount  how many of BullMQ's arguments of that add open ARGV[rest..] (0 without one)
    traceparent  the W3C traceparent of the pusher's active span, '' for none (see includes/traces.lua)
    maxPending   the key's maxPendingPerKey, 0 for none (see includes/backlog.lua)
    fillMin, fillMaxWaitMs  wait to fill: the key's minSliceSize (1: no wait) and maxWaitMs (see
                 includes/fill.lua)
    high         a push with priority 'high': its ids wait in the key's high store. A set's or
                 zset's id pushed at both levels waits at high, at the earlier of its two times
                 (see includes/priority.lua)
    stored       how many ids the push wrote just before this call, by RPUSH in the same MULTI
                 (a list push of many ids, untracked, without data, trace, maxPending or priority;
                 see protocol.ts `push`): none are sent; 0 for a push whose ids follow
  ARGV[rest..] BullMQ's arguments of the add (addArgCount, as BullMQ built them), then the ids,
               then (with data) as many payloads, '' for an id pushed without

  Refuses, writing nothing: {REPLY.unknownTicket, 0} an open ticket (ticketMode) that is unknown
  or expired; {REPLY.sealedTicket, 0} one that is sealed; {REPLY.backlogFull, pending, adding}
  a push that would take the key's pending ids past maxPending (the key's pending count, and how
  many ids the push would add); {REPLY.wrongType, name, found, wanted} a key the push would write
  (or read by its type) that holds another type (its name, its type, the type the push needs).
  With `stored`, the ids were written before the call: a refusal then refuses the rest only.
  Returns {covered, waitMs, added}: covered 1 when a run or a waiting job of ours will claim these
  ids (no job add needed: the job the key's pointer names, when it is ours and has not ended, see
  includes/key-job.lua), 0 otherwise; waitMs ms until the key may claim: (zset) until its
  earliest id (of either level) or failed slice is due, -1 when none; for any store, until its
  ids have waited to fill (or its earliest failed slice, or a high id, is due), and at least
  until its pause or hold ends; added the key's job id when this call added the job (or brought
  it forward), else nil.
]]
--- @include "keyspace"
--- @include "clock"
--- @include "chunked"
--- @include "marks"
--- @include "extras"
--- @include "flow"
--- @include "payloads"
--- @include "traces"
--- @include "due"
--- @include "backlog"
--- @include "priority"
--- @include "fill"
--- @include "key-job"
--- @include "bullmq-adds"
--- @include "key-job-events"
-- The key's names, built past the plain path (which builds its own). Its declaration opens the
-- body: the args include after it is read from each call's ARGV (see args.ts), not in the prelude.
local K
--- @include "args-push"
local queue = arg_queuePrefix
-- BullMQ's add's arguments open the tail, the ids follow.
local ADD_ARGS, FIRST = arg_rest, arg_rest + arg_addArgCount
local mode = arg_payloadMode

-- BullMQ's add of the key's job this call was sent (addJob), on this queue's keys, with its arguments.
local function addSent()
  return bullmqAdd(arg_addJob, bullmqKeys(queue, arg_addJob), {unpack(ARGV, ADD_ARGS, FIRST - 1)})
end

-- Redis does not roll a script back: a command that fails on a key of the wrong type after the
-- ids are written would leave them stored with no job and no index entry. So the general path
-- checks every key it writes or reads by type after its first write (typeRefusal: TYPE is O(1)),
-- and the plain one takes its ids back when a write after them fails; both read a failed write
-- with writeRefusal.
local function typeRefusal(name, wanted)
  local found = redis.call('TYPE', name).ok
  if found ~= 'none' and found ~= wanted then return {REPLY.wrongType, name, found, wanted} end
end
-- The reply to a write of key `name` that failed with `err` (as redis.pcall or pcall gives it),
-- nothing of the push left written: a key of the wrong type is refused as typeRefusal refuses it;
-- any other error (OOM, from a script run as EVAL) is Redis's own, answered as its error reply (a
-- raised text would come back prefixed with the script's name and line).
local function writeRefusal(err, name, wanted)
  local message = type(err) == 'table' and err.err or err
  if type(message) == 'string' and string.find(message, 'WRONGTYPE', 1, true) then
    return {REPLY.wrongType, name, redis.call('TYPE', name).ok, wanted}
  end
  return redis.error_reply(tostring(message))
end

-- Takes back a list push's `count` ids, the last of `pending` (now `length` long): a write after
-- them failed, and this call is atomic, so the list is as it was before the push.
local function takeBackIds(pending, count, length)
  if length == count then redis.call('DEL', pending) else redis.call('LTRIM', pending, 0, -count - 1) end
end

-- The plain push: a list key's ids, untracked, without data, trace, priority, backlog cap or wait
-- to fill, stored whole in this call, on a standalone Redis that carries BullMQ's standard add,
-- to a key with no extras (see extras.lua: no pause, hold, failed slice, ticket, data). It makes
-- only the commands such a push needs and builds only the names it reads, in a straight line:
-- the general path below pays for every feature a key may have (a table of names, the clock,
-- closures, a check per feature). What it does is what the general path does for such a key. It
-- returns nil, having written nothing, for a key it finds with extras: the general path takes it.
local function plainPush()
  local base = KEYS[1]
  local lock, extras = base .. KEY_SUFFIXES.lock, base .. KEY_SUFFIXES.extras
  local pointer = queue .. JOB_POINTER .. encodedKeyOf(base)
  local got = redis.call('MGET', lock, extras, pointer)
  if got[2] then return nil end
  local state = not got[1] and pointedJob(queue, got[3], arg_key, false)
  local pending, count = base .. KEY_SUFFIXES.pending, #ARGV - FIRST + 1
  local length = redis.pcall('RPUSH', pending, unpack(ARGV, FIRST))
  if type(length) == 'table' then return writeRefusal(length, pending, 'list') end
  -- The writes after the ids (the marks, and the index unless this call adds the key's job) may
  -- fail on a key of the wrong type: the ids are taken back then, exactly, so a refused push wrote
  -- nothing, as the general path's checks before the write ensure. A plain push asks no TYPE.
  local marks = base .. KEY_SUFFIXES.pushMarks
  if length == count then
    local ok, err = pcall(startMarks, marks, clockMs())
    if not ok then
      takeBackIds(pending, count, length)
      return writeRefusal(err, marks, 'list')
    end
  end
  if got[1] or state == BULLMQ_WAITING then
    local listed = redis.pcall('ZADD', KEYS[2], arg_indexScore, arg_key)
    if type(listed) == 'table' then
      takeBackIds(pending, count, length)
      if length == count then redis.call('DEL', marks) end
      return writeRefusal(listed, KEYS[2], 'zset')
    end
    return {1, 0}
  end
  holdBullmqEvents(true)
  local added = ensureKeyJob(queue, pointer, got[3], state, 0, addSent)
  releaseBullmqEvents(keepNone)
  return {0, 0, added}
end
-- At most this many ids in a plain push: RPUSH takes them as one call's arguments (the general
-- path sends more in chunks).
local PLAIN_MAX = 1000
if arg_store == 'list' and arg_stored == 0 and mode == '' and arg_ticket == '' and arg_traceparent == '' and not arg_high
  and not arg_callback and arg_maxPending == 0 and arg_fillMin <= 1 and queue ~= '' and arg_addJob == BULLMQ_STANDARD_ADD and #ARGV - FIRST < PLAIN_MAX then
  local reply = plainPush()
  if reply then return reply end
end

K = keyNames(KEYS[1], 0)
local count = arg_stored > 0 and arg_stored or mode == '' and #ARGV - FIRST + 1 or (#ARGV - FIRST + 1) / 2
local LAST = FIRST + count - 1
local kind = arg_store
local ticket = arg_ticket
local ticketHash = ticket ~= '' and (K.ticketPrefix .. ticket) or nil
local traceparent = arg_traceparent
local now = clockMs()
-- The names of the level the ids go to: a push with priority writes the key's high store.
local W = arg_high and highNames(K, kind) or K

-- The types of what this push writes after its ids (see typeRefusal), in a straight line: no
-- table per check.
local refused = (ticketHash and typeRefusal(ticketHash, 'hash'))
  -- Read by the backlog's count before the ids' write.
  or (arg_maxPending > 0 and typeRefusal(W.pending, kind))
  or (kind ~= 'zset' and typeRefusal(W.pushMarks, kind == 'list' and 'list' or 'string'))
  -- The other level's store: read by oneCopy (set, zset), the backlog and the wait to fill.
  or ((kind ~= 'list' or arg_maxPending > 0 or arg_fillMin > 1) and typeRefusal(arg_high and K.pending or K.pendingHigh, kind))
  or ((kind == 'zset' or arg_fillMin > 1) and typeRefusal(K.retry, 'zset'))
  or (mode ~= '' and typeRefusal(W.payloads, 'hash'))
  or (traceparent ~= '' and typeRefusal(K.traces, 'hash'))
  or (ticket ~= '' and typeRefusal(W.tracked, 'hash'))
  or (queue ~= '' and typeRefusal(KEYS[2], 'zset'))
if refused then return refused end

if ticket ~= '' and arg_ticketMode == 'open' then
  local t = redis.call('HMGET', ticketHash, 'total', 'sealed')
  if not t[1] then return {REPLY.unknownTicket, 0} end
  if t[2] ~= '0' then return {REPLY.sealedTicket, 0} end
end

-- Judged in the same call as the write, so concurrent pushes never take the key past its limit.
local pending, adding = backlogOver(kind, K, arg_high, arg_maxPending, ARGV, FIRST, LAST)
if pending then return {REPLY.backlogFull, pending, adding} end

-- The ids' write, the push's first (every chunk is of one key): its refusal, or nil and its reply.
local function firstWrite(write, ...)
  local ok, reply = pcall(write, ...)
  if ok then return nil, reply end
  return writeRefusal(reply, W.pending, kind)
end

local waitMs = 0
if kind == 'list' then
  -- Ids the push stored before this call (stored): LLEN fails on a key of the wrong type, as their
  -- RPUSH did, so this call writes nothing either. Pending was empty when its length is this
  -- push's ids alone: only then a mark (marks.lua).
  local length
  if arg_stored > 0 then
    refused, length = firstWrite(redis.call, 'LLEN', W.pending)
  else
    refused, length = firstWrite(chunked, 'RPUSH', W.pending, ARGV, FIRST, LAST)
  end
  if refused then return refused end
  if length == count then startMarks(W.pushMarks, now) end
elseif kind == 'set' then
  refused = firstWrite(chunked, 'SADD', W.pending, ARGV, FIRST, LAST)
  if refused then return refused end
  -- When pending went from empty to non-empty (a claim that empties it clears the mark).
  redis.call('SET', W.pushMarks, now, 'NX')
else
  -- Ready at the Redis server's now + delay; re-adding an id moves it (debounce).
  local at = now + arg_delayMs
  local scored = {}
  for i = FIRST, LAST do
    scored[#scored + 1] = at
    scored[#scored + 1] = ARGV[i]
  end
  refused = firstWrite(chunked, 'ZADD', W.pending, scored)
  if refused then return refused end
end
-- A set or zset keeps one copy of a waiting id: one pushed at both levels waits at high.
oneCopy(kind, K, ARGV, FIRST, LAST)
-- A list's or set's pending is not empty now: due at once, unless it waits to fill (a high
-- push's ids never do; see includes/priority.lua).
local filling = (arg_high and kind ~= 'zset') and 0 or fillWait(kind, K, arg_fillMin, arg_fillMaxWaitMs)
if kind == 'zset' or filling > 0 then
  local due = filledDueAt(kind, K, filling, false)
  waitMs = due and math.max(0, due - now) or -1
end

-- After the ids: every key below was checked for its type before them (see typeRefusal).
if mode ~= '' or ticket ~= '' or traceparent ~= '' or arg_high then markExtras(K) end
if mode ~= '' then
  for i = FIRST, LAST do storePayload(W.payloads, ARGV[i], ARGV[i + count], mode) end
end
if traceparent ~= '' then storeTraces(K.traces, traceparent, ARGV, FIRST, LAST) end

if ticket ~= '' then
  for i = FIRST, LAST do
    local tickets = redis.call('HGET', W.tracked, ARGV[i])
    redis.call('HSET', W.tracked, ARGV[i], tickets and (tickets .. ' ' .. ticket) or ticket)
  end
  local ttl = arg_ticketTtlMs
  -- The tracked ids live as long as their youngest ticket could.
  if redis.call('PTTL', W.tracked) < ttl then redis.call('PEXPIRE', W.tracked, ttl) end
  redis.call('HINCRBY', ticketHash, 'total', count)
  -- Without `sealed`, a ticket is sealed: a tracked push's ids are all of it.
  if arg_ticketMode == 'new' then redis.call('HSET', ticketHash, 'ttl', ttl, 'cb', arg_callback and '1' or '0') end
  redis.call('PEXPIRE', ticketHash, ttl)
end

-- A key paused until resumed needs no job (its resume adds one); a paused or held one waits at
-- least until that ends. Only a key with extras can be either (see includes/extras.lua).
local function holding(extras)
  -- Only a key with extras can have high ids (see includes/priority.lua), due before the others.
  if extras and waitMs ~= 0 then waitMs = waitWithHigh(kind, K, waitMs, now) end
  local held = extras and heldFor(K.paused, K.hold)
  if held == -1 then return true end
  if held and held > waitMs then waitMs = held end
  return false
end

if queue == '' then
  if holding(redis.call('EXISTS', K.extras) == 1) then return {1, waitMs} end
  return {redis.call('EXISTS', K.lock), waitMs}
end
-- The key goes in the recovery index unless this call adds its job: the index is the way back
-- for ids that may be left with no job (the caller adds it after this call, and may die first;
-- a run or a job that covers the ids may fail). A job added here covers its ids until its run
-- claims them, and a run that fails lists its key (see engine/recovery.ts).
local function listed(reply)
  redis.call('ZADD', KEYS[2], arg_indexScore, arg_key)
  return reply
end
-- One read for the lock, the extras mark and the key's job pointer (standalone: any keys may share
-- a call); then what state the job it names is in (includes/key-job.lua).
local pointer = queue .. JOB_POINTER .. encodedKeyOf(KEYS[1])
local got = redis.call('MGET', K.lock, K.extras, pointer)
if holding(got[2]) or got[1] then return listed({1, waitMs}) end
local state, delayed = pointedJob(queue, got[3], arg_key, false)

-- A waiting (or prioritized) job of ours will claim soon. An active one may be between its last
-- claim and its completion, and a delayed one may be backing off or waiting for a zset time:
-- for them, as for no job, the job is added here (a new one for an active job, the delayed one
-- brought forward: includes/key-job.lua) when the caller sent BullMQ's add and it may start
-- now; else the caller adds it (delayed, or at another level). A key waiting to fill whose job
-- waits delayed is covered if that job starts by then.
if state == BULLMQ_WAITING or (state == BULLMQ_DELAYED and filling > 0 and startsBy(delayed, now + waitMs)) then
  return listed({1, waitMs})
end
-- The caller sent BullMQ's add for the wait the key has: its standard add for a key that may
-- start now, its delayed add, built for maxWaitMs, for one whose ids wait that long to fill (this
-- push's are the first of the wait); else the caller adds it (a held key, or at another level).
local waits = arg_addJob == BULLMQ_DELAYED_ADD
if arg_addJob == '' or waitMs ~= (waits and arg_fillMaxWaitMs or 0) then return listed({0, waitMs}) end
holdBullmqEvents(true)
local added = ensureKeyJob(queue, pointer, got[3], state, waitMs, addSent)
releaseBullmqEvents(keepNone)
-- A ticket that wants a callback is listed all the same: a worker that dies between settling it
-- and adding its callback job leaves it in the key's outbox, which only the sweep drains.
if arg_callback then redis.call('ZADD', KEYS[2], arg_indexScore, arg_key) end
return {0, waitMs, added}

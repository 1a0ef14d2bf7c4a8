--[[
  One page of a key's pending ids, in the order its claims take them (see includes/priority.lua):
  the high level's ids before the normal level's, a list's from its head (FIFO), a zset's by ready
  time (those not ready yet included, last), a set's in SSCAN's order (a set's claims SPOP: no
  order). One call, so a page's ids, data and counts are of one moment. It reads at most `limit`
  ids of the store (and, for a list page past its head with data, the entries before it, in
  chunks: see below), never the whole store.

  KEYS[1] the key's base name: every name of the key is derived from it (see keys.ts)
  ARGV    by name, generated from storage/scripts/args.ts (`pending-page`):
    store   'list' | 'set' | 'zset'
    levels  'both' (high, then normal) | 'high' | 'normal'
    offset  list, zset: the page's first position over the levels read, high first
    cursor  set: where the last page stopped, `level scan skip` ('' from the start): the level
            ('high' | 'normal'), an SSCAN cursor and how many ids of that cursor's batch were listed
    limit   ids at most

  Returns { high count, normal count, next ('' on the last page; else the next offset, or a set's
  next cursor), then four per id: the id, its level ('high' | 'normal'), its payloads as a claim
  would give them ('' for none: JSON texts, each followed by '\n'; see includes/payloads.lua), its
  ready time (zset; '' otherwise) }
]]
--- @include "keyspace"
--- @include "args-pending-page"
local A = pendingPageArgs()
local K = keyNames(KEYS[1], 0)
local SIZE = { list = 'LLEN', set = 'SCARD', zset = 'ZCARD' }
local size = SIZE[A.store]
if not size then return redis.error_reply('batch-by-key: unknown store ' .. tostring(A.store)) end

-- A list keeps each push's data apart at each level; a set or zset one copy per id, in payloads.
local levels = {}
if A.levels ~= 'normal' then
  levels[#levels + 1] = { name = 'high', key = K.pendingHigh, data = A.store == 'list' and K.payloadsHigh or K.payloads }
end
if A.levels ~= 'high' then levels[#levels + 1] = { name = 'normal', key = K.pending, data = K.payloads } end

local out = { redis.call(size, K.pendingHigh), redis.call(size, K.pending), '' }
local taken = 0

local function add(id, level, payloads, score)
  out[#out + 1] = id
  out[#out + 1] = level
  out[#out + 1] = payloads or ''
  out[#out + 1] = score or ''
  taken = taken + 1
end

-- A list's entries of one id take its payloads in turn, one per claim (payloads.lua
-- claimPayloads): the entry at `first` gets the line after those of the id's entries before it,
-- counted in chunks, and only when the page holds an id with data.
local function listPage(level, first, last)
  local ids = redis.call('LRANGE', level.key, first, last)
  local fields = redis.call('EXISTS', level.data) == 1 and redis.call('HMGET', level.data, unpack(ids)) or {}
  local lines, seen, any = {}, {}, false
  for i, id in ipairs(ids) do
    if fields[i] and not lines[id] then
      lines[id] = {}
      for line in string.gmatch(fields[i], '([^\n]*\n)') do lines[id][#lines[id] + 1] = line end
      seen[id], any = 0, true
    end
  end
  if any then
    for from = 0, first - 1, 1000 do
      for _, id in ipairs(redis.call('LRANGE', level.key, from, math.min(from + 999, first - 1))) do
        if seen[id] then seen[id] = seen[id] + 1 end
      end
    end
  end
  for _, id in ipairs(ids) do
    local payload
    if lines[id] then
      payload = lines[id][seen[id] + 1]
      seen[id] = seen[id] + 1
    end
    add(id, level.name, payload)
  end
end

local function zsetPage(level, first, last)
  local scored = redis.call('ZRANGE', level.key, first, last, 'WITHSCORES')
  for i = 1, #scored, 2 do
    add(scored[i], level.name, redis.call('HGET', level.data, scored[i]) or nil, scored[i + 1])
  end
end

if A.store ~= 'set' then
  local skip, total = A.offset, 0
  for _, level in ipairs(levels) do
    local n = redis.call(size, level.key)
    total = total + n
    if taken < A.limit and skip < n then
      local last = math.min(n - 1, skip + A.limit - taken - 1)
      if A.store == 'list' then listPage(level, skip, last) else zsetPage(level, skip, last) end
      skip = 0
    else
      skip = math.max(0, skip - n)
    end
  end
  if A.offset + taken < total then out[3] = tostring(A.offset + taken) end
  return out
end

-- A set: SSCAN from the cursor; a batch of SSCAN's may hold more ids than the page has room for
-- (a small set's comes whole), so the cursor also counts the ids of its batch already listed.
local at, scan, skip = 1, '0', 0
if A.cursor ~= '' then
  local name, cursor, listed = string.match(A.cursor, '^(%a+) (%d+) (%d+)$')
  for i, level in ipairs(levels) do
    if level.name == name then at = i end
  end
  scan, skip = cursor, tonumber(listed)
end
while at <= #levels and taken < A.limit do
  local level = levels[at]
  local reply = redis.call('SSCAN', level.key, scan, 'COUNT', A.limit)
  local batch, i = reply[2], skip + 1
  while i <= #batch and taken < A.limit do
    add(batch[i], level.name, redis.call('HGET', level.data, batch[i]) or nil)
    i = i + 1
  end
  if i <= #batch then
    out[3] = level.name .. ' ' .. scan .. ' ' .. (i - 1)
    return out
  end
  scan, skip = reply[1], 0
  if scan == '0' then at = at + 1 end
end
if at <= #levels then out[3] = levels[at].name .. ' ' .. scan .. ' 0' end
return out

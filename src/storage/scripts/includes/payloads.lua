-- Data per id ("payloads"): a hash per key of id -> its payloads, each a JSON text followed by
-- '\n' (JSON text never holds a raw newline), oldest first; '\n' alone is a push without data.
-- Payloads are moved as opaque strings, never decoded here: cjson would turn [] into {} and
-- round large numbers. They follow their ids exactly as tickets do (see tracking.lua): waiting
-- -> in flight on a claim (a list claims one push of an id, a set or zset all of them, merged),
-- dropped on an ack, back in front on a restore. A failed slice's data waits with the slice, in
-- the key's retry data (`sliceId\nid` -> payloads), not with the ids pushed since, and comes back
-- in flight when the slice runs again. Keys without data pay one EXISTS.

-- The payloads of a field value, in order ('' for a push without data).
local function splitPayloads(value)
  local out = {}
  for payload in string.gmatch(value, '([^\n]*)\n') do out[#out + 1] = payload end
  return out
end

-- Stores one pushed payload for `id` by `mode`: 'list' appends (each push is its own entry),
-- 'replace' keeps only the latest, 'keep' the first, 'all' every distinct one in push order.
-- `payload` '' is a push without data: it keeps a list's entries aligned, and changes nothing
-- for the merging stores.
local function storePayload(data, id, payload, mode)
  local entry = payload .. '\n'
  if mode == 'list' then
    if payload ~= '' or redis.call('HEXISTS', data, id) == 1 then
      redis.call('HSET', data, id, (redis.call('HGET', data, id) or '') .. entry)
    end
  elseif payload == '' then
    return
  elseif mode == 'replace' then
    redis.call('HSET', data, id, entry)
  elseif mode == 'keep' then
    redis.call('HSETNX', data, id, entry)
  else
    local kept = redis.call('HGET', data, id) or ''
    if string.find('\n' .. kept, '\n' .. entry, 1, true) == nil then redis.call('HSET', data, id, kept .. entry) end
  end
end

-- The reply's JSON object of the payloads in flight: {"id":[payload,...],...}, '' for none.
local function inFlightPayloads(inFlight)
  local flat = redis.call('HGETALL', inFlight)
  if #flat == 0 then return '' end
  local parts = {}
  for i = 1, #flat, 2 do
    local kept = {}
    for _, payload in ipairs(splitPayloads(flat[i + 1])) do
      if payload ~= '' then kept[#kept + 1] = payload end
    end
    parts[#parts + 1] = cjson.encode(flat[i]) .. ':[' .. table.concat(kept, ',') .. ']'
  end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- Moves claimed ids' payloads from waiting to in flight: a list's first one per claimed entry
-- (`perPush`), a set's or zset's all. Returns the reply's JSON of them (see inFlightPayloads).
local function claimPayloads(data, inFlight, ids, perPush)
  if redis.call('EXISTS', data) == 0 then return '' end
  for _, id in ipairs(ids) do
    local value = redis.call('HGET', data, id)
    if value then
      local moved, rest = value, ''
      if perPush then moved, rest = string.match(value, '^([^\n]*\n)(.*)$') end
      if rest == '' then redis.call('HDEL', data, id) else redis.call('HSET', data, id, rest) end
      redis.call('HSET', inFlight, id, (redis.call('HGET', inFlight, id) or '') .. moved)
    end
  end
  return inFlightPayloads(inFlight)
end

-- Puts an in-flight id's payloads back in front of its waiting ones.
local function unclaimPayload(data, inFlight, id)
  local moved = redis.call('HGET', inFlight, id)
  if not moved then return end
  redis.call('HSET', data, id, moved .. (redis.call('HGET', data, id) or ''))
  redis.call('HDEL', inFlight, id)
end

local function unclaimAllPayloads(data, inFlight)
  for _, id in ipairs(redis.call('HKEYS', inFlight)) do unclaimPayload(data, inFlight, id) end
end

-- A failed (or crashed, or restored retry) slice `sliceId` keeps its ids' in-flight payloads
-- in the retry data until it runs again.
local function keepForRetry(retryData, inFlight, sliceId, ids)
  if redis.call('EXISTS', inFlight) == 0 then return end
  for _, id in ipairs(ids) do
    local moved = redis.call('HGET', inFlight, id)
    if moved then
      redis.call('HSET', retryData, sliceId .. '\n' .. id, moved)
      redis.call('HDEL', inFlight, id)
    end
  end
end

-- A failed slice runs again: its ids' kept payloads go back in flight. Returns the reply's JSON
-- of them (see inFlightPayloads).
local function claimRetryPayloads(retryData, inFlight, sliceId, ids)
  if redis.call('EXISTS', retryData) == 0 then return '' end
  for _, id in ipairs(ids) do
    local field = sliceId .. '\n' .. id
    local kept = redis.call('HGET', retryData, field)
    if kept then
      redis.call('HSET', inFlight, id, kept)
      redis.call('HDEL', retryData, field)
    end
  end
  return inFlightPayloads(inFlight)
end

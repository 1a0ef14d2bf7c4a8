-- Trace context per id (K.traces, see keys.ts): a hash of id -> the W3C traceparent of the first
-- push made inside an active OpenTelemetry span while the id waits. Only such a push writes it
-- (setting the extras mark first), so a key pushed without a trace context never has it, and a
-- claim reads it only while the extras mark is there. A claim takes its ids' entries to the worker,
-- which links the slice's span to those pushes (ops/tracing.ts); a failed slice keeps them in its
-- retry JSON, written by the worker. One entry per id bounds the hash by the ids waiting.
--- @include "chunked"

-- Records `traceparent` for the ids args[first..last] that have none yet: the first push of a
-- waiting id is the one that asked for its work (a set or zset merges the later ones into it; a
-- list's later copy of the id is claimed after the first, which takes the entry).
local function storeTraces(traces, traceparent, args, first, last)
  for i = first, last do redis.call('HSETNX', traces, args[i], traceparent) end
end

-- Takes the entries of the claimed `ids`. Returns the reply's JSON object of them (id ->
-- traceparent), '' for none.
local function claimTraces(traces, ids)
  if redis.call('EXISTS', traces) == 0 then return '' end
  local found = {}
  local any = false
  for i = 1, #ids, 1000 do
    local chunk = {unpack(ids, i, math.min(i + 999, #ids))}
    local values = redis.call('HMGET', traces, unpack(chunk))
    for j, value in ipairs(values) do
      if value then
        found[chunk[j]] = value
        any = true
      end
    end
  end
  if not any then return '' end
  chunked('HDEL', traces, ids)
  return cjson.encode(found)
end

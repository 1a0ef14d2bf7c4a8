--[[
  Records dead letters: ids of one key whose slice used every attempt. Written before the fenced
  fail-slice (they live in the batcher's own slot), so they may have to be taken back: for each id
  it returns the letter it replaced, if any (an id requeued that failed again before the requeue
  removed its letter), and the letter it wrote, for dead-undo.lua. It evicts nothing: the cap is
  applied by dead-trim.lua once fail-slice has accepted the failure, so a holder that turns out to
  be fenced out never evicts real letters.

  KEYS[1] entries (hash: field -> JSON entry)   KEYS[2] fields by time of last failure
  KEYS[3] fields by attempts
  KEYS[4] prefix of the per-key sets of fields by time (followed by the encoded key; in this slot)
  ARGV[1] encoded key (a field is `${encoded key}:${id}`)     ARGV[2] key
  ARGV[3] attempts    ARGV[4] first failed at (ms)           ARGV[5] last failed at (ms)
  ARGV[6] error, JSON { name, message, stack }
  ARGV[7] n, how many ids    ARGV[8..7+n] ids    ARGV[8+n..7+2n] the JSON array of each id's
          data ('' for none), kept in its letter as `payloads` (inserted as text, never decoded:
          cjson would turn [] into {} and round large numbers)
  ARGV[8+2n..7+3n] optional: each id's own error, JSON as ARGV[6] (ids a handler failed one by
          one, with `ctx.fail`); without them every id records ARGV[6]

  Returns a flat list: field, the letter it replaced ('' for none), the letter it wrote; per id.
]]
local slicesError = cjson.decode(ARGV[6])
local attempts = tonumber(ARGV[3])
local lastAt = tonumber(ARGV[5])
local ofKey = KEYS[4] .. ARGV[1]
local written = {}
local n = tonumber(ARGV[7])
local own = #ARGV >= 7 + 3 * n
for i = 8, 7 + n do
  local id = ARGV[i]
  local error = own and cjson.decode(ARGV[i + 2 * n]) or slicesError
  local field = ARGV[1] .. ':' .. id
  local entry = cjson.encode({ key = ARGV[2], id = id, error = error, attempts = attempts, firstFailedAt = tonumber(ARGV[4]), lastFailedAt = lastAt })
  local payloads = ARGV[i + n]
  if payloads ~= '' then entry = string.sub(entry, 1, -2) .. ',"payloads":' .. payloads .. '}' end
  written[#written + 1] = field
  written[#written + 1] = redis.call('HGET', KEYS[1], field) or ''
  written[#written + 1] = entry
  redis.call('HSET', KEYS[1], field, entry)
  redis.call('ZADD', KEYS[2], lastAt, field)
  redis.call('ZADD', KEYS[3], attempts, field)
  redis.call('ZADD', ofKey, lastAt, field)
end
return written

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
  ARGV    by name, generated from storage/scripts/args.ts (`dead-add`):
    encodedKey, key  the key, encoded (a field is `${encoded key}:${id}`), and as given
    attempts, firstFailedAt, lastFailedAt (ms)
    error            JSON { name, message, stack }
    count            n, how many ids
  ARGV[rest..rest+n-1] the ids, then ARGV[rest+n..rest+2n-1] the JSON array of each id's data ('' for
          none), kept in its letter as `payloads` (inserted as text, never decoded: cjson would
          turn [] into {} and round large numbers), then, optional, ARGV[rest+2n..rest+3n-1] each
          id's own error, JSON as `error` (ids a handler failed one by one, with `ctx.fail`);
          without them every id records `error`

  Returns a flat list: field, the letter it replaced ('' for none), the letter it wrote; per id.
]]
--- @include "args-dead-add"
local A = deadAddArgs()
local slicesError = cjson.decode(A.error)
local ofKey = KEYS[4] .. A.encodedKey
local written = {}
local n = A.count
local own = #ARGV >= A.rest - 1 + 3 * n
for i = A.rest, A.rest + n - 1 do
  local id = ARGV[i]
  local error = own and cjson.decode(ARGV[i + 2 * n]) or slicesError
  local field = A.encodedKey .. ':' .. id
  local entry = cjson.encode({ key = A.key, id = id, error = error, attempts = A.attempts, firstFailedAt = A.firstFailedAt, lastFailedAt = A.lastFailedAt })
  local payloads = ARGV[i + n]
  if payloads ~= '' then entry = string.sub(entry, 1, -2) .. ',"payloads":' .. payloads .. '}' end
  written[#written + 1] = field
  written[#written + 1] = redis.call('HGET', KEYS[1], field) or ''
  written[#written + 1] = entry
  redis.call('HSET', KEYS[1], field, entry)
  redis.call('ZADD', KEYS[2], A.lastFailedAt, field)
  redis.call('ZADD', KEYS[3], A.attempts, field)
  redis.call('ZADD', ofKey, A.lastFailedAt, field)
end
return written

--[[
  Pauses one key: sets its paused marker (the truth every claim, push and release reads; see
  includes/flow.lua) and, on a standalone server, lists it in the batcher's paused index in the
  same call, so a resume at the same moment can never leave the key paused but unlisted. On a
  Cluster the index is in another slot: the caller lists it after this call, with the score
  returned (and the recovery sweep re-lists a paused key whose entry is missing).

  KEYS[1] the key's base name: its paused marker is derived from it (see keys.ts)
  KEYS[2] (standalone only) the batcher's paused index (key -> end of its pause, '+inf' until resumed)
  ARGV[1] the key (its index member)
  ARGV[2] how long the pause lasts, ms; -1: until resumed

  Returns the pause's end by the Redis clock (ms), or '+inf'.
]]
--- @include "keyspace"
--- @include "clock"
--- @include "extras"
local K = keyNames(KEYS[1], 0)
markExtras(K)
local ms = tonumber(ARGV[2])
local untilMs = ms < 0 and '+inf' or tostring(clockMs() + ms)
if ms < 0 then
  redis.call('SET', K.paused, '')
else
  redis.call('SET', K.paused, untilMs, 'PX', ms)
end
if KEYS[2] then redis.call('ZADD', KEYS[2], untilMs, ARGV[1]) end
return untilMs

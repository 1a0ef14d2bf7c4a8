--[[
  Ends one key's pause: deletes its paused marker and, on a standalone server, its entry in the
  batcher's paused index in the same call (see pause-key.lua). A key whose timed pause ended is
  not paused, whether or not its index entry was dropped yet.

  KEYS[1] the key's base name: its paused marker is derived from it (see keys.ts)
  KEYS[2] (standalone only) the batcher's paused index
  ARGV[1] the key (its index member)

  Returns 1 when the key was paused, 0 when it was not (its stale index entry, if any, is gone).
]]
--- @include "keyspace"
local existed = redis.call('DEL', keyNames(KEYS[1], 0).paused)
if KEYS[2] then redis.call('ZREM', KEYS[2], ARGV[1]) end
return existed

-- The three stores' sides of a claim; a call builds only the one its key uses.
--- @include "store-list"
--- @include "store-set"
--- @include "store-zset"
-- Built when first used, then kept: a library of functions builds each once per server, a script
-- sent by EVALSHA once per call. A store holds no key of its own: a function that writes the
-- key's names takes them (K) first.
local STORES = { list = listStore, set = setStore, zset = zsetStore }
local built = {}
--- @memo built (a store is the same whichever call builds it)
local function storeOf(kind)
  local store = built[kind]
  if store then return store end
  local build = STORES[kind]
  if not build then error('batch-by-key: unknown store ' .. tostring(kind)) end
  store = build()
  built[kind] = store
  return store
end

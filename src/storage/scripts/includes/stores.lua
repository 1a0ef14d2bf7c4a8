-- The three stores' sides of a claim; a call builds only the one its key uses.
--- @include "store-list"
--- @include "store-set"
--- @include "store-zset"
local STORES = { list = listStore, set = setStore, zset = zsetStore }
local function storeOf(kind)
  local build = STORES[kind]
  if not build then error('batch-by-key: unknown store ' .. tostring(kind)) end
  return build()
end

-- Runs `command key arg...` over `args` (from index `first`, default 1, to `last`, default the
-- end) in calls of at most 1000 arguments (unpack and Redis both have limits on how many one call
-- takes). Keep pairs (score, member) whole: 1000 is even. Returns the last call's reply.
local function chunked(command, key, args, first, last)
  last = last or #args
  local reply
  for i = first or 1, last, 1000 do
    reply = redis.call(command, key, unpack(args, i, math.min(i + 999, last)))
  end
  return reply
end

-- Runs `command key arg...` over `args` (from index `first`, default 1) in calls of at most 1000
-- arguments (unpack and Redis both have limits on how many one call takes). Keep pairs (score,
-- member) whole: 1000 is even.
local function chunked(command, key, args, first)
  for i = first or 1, #args, 1000 do
    redis.call(command, key, unpack(args, i, math.min(i + 999, #args)))
  end
end

/** One of BullMQ's Lua scripts as its package ships it: the source, and how many of its arguments are keys. */
export interface BullmqScript {
  content: string;
  keys: number;
}

/**
 * BullMQ's Lua script `name` (`moveToActive`, `moveToFinished`, `addStandardJob`, …), as the
 * installed package ships it in `bullmq/dist/cjs/scripts` (generated from its
 * `src/commands/*.lua`, includes inlined). Our scripts inline these (storage/scripts/index.ts),
 * so that a push adds a key's job, and a fetch or a claim runs BullMQ's own fetch or completion,
 * in the same call. Throws, naming the script, when the installed BullMQ has no such script.
 */
export function bullmqScript(name: string): BullmqScript {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- BullMQ's script sources have no typed export.
  const scripts = require('bullmq/dist/cjs/scripts') as Record<string, BullmqScript | undefined>;
  const script = scripts[name];
  if (!script) throw new Error(`the installed BullMQ has no script ${name}`);
  return script;
}

/** The name of a queue's event stream after its prefix (`prefix:name:`). */
const EVENTS_SUFFIX = 'events';

/**
 * BullMQ's writes to its queue's event stream (`…:events`: XADD and XTRIM) in one of its
 * scripts as the installed package ships it, made through `bullmqEvent` (see `bullmqEventsInclude`)
 * instead of `rcall`: every one of them is a statement `rcall("XADD", …)` or `rcall("XTRIM", …)`,
 * whose reply BullMQ never reads. Throws, naming the script, when it makes them otherwise.
 */
export function withHeldEvents(name: string, content: string): string {
  const rewritten = content.replace(/\brcall\("(XADD|XTRIM)",/g, 'bullmqEvent("$1",');
  if (/\b(?:rcall|redis\.p?call)\(\s*["'](?:XADD|XTRIM)["']/i.test(rewritten)) {
    throw new Error(`BullMQ's ${name} writes its event stream otherwise than bullmq/scripts.ts reads it`);
  }
  return rewritten;
}

/**
 * Lua, included once before any of BullMQ's scripts a script of ours inlines (see
 * `withHeldEvents`): `bullmqEvent` makes BullMQ's event-stream write at once, unless
 * `holdBullmqEvents(drop)` was called in this call; then it is held until
 * `releaseBullmqEvents(keep)` writes those that `keep(queuePrefix, jobId)` keeps: an XADD naming a
 * job (its `jobId` field; the queue's prefix is the stream's name less `events`) when keep says
 * so, one naming none (`drained`) always, an XTRIM when any XADD is written. In order, in the
 * same call: a reader of the stream sees what BullMQ would have written, less what keep drops.
 * `drop`, when the caller knows already: `true` drops every XADD naming a job as it is made (an add
 * of ours, whose keep is keepNone), a job id drops that job's (the key job a claim completes), so
 * they cost no table and no pass of the release.
 */
export function bullmqEventsInclude(): string {
  return `-- BullMQ's event-stream writes, held and filtered by job (bullmq/scripts.ts bullmqEventsInclude).
local heldBullmqEvents
--- @per-call heldBullmqEvents = nil
local droppedBullmqEvents
--- @per-call droppedBullmqEvents = nil
-- The job an XADD's fields name (the value after \`jobId\`), or nil.
local function bullmqEventJob(...)
  for j = 3, select('#', ...) - 1 do
    if select(j, ...) == 'jobId' then return (select(j + 1, ...)) end
  end
end
local function bullmqEvent(...)
  if not heldBullmqEvents then return redis.call(...) end
  local drop = droppedBullmqEvents
  if drop and ... == 'XADD' then
    local job = bullmqEventJob(...)
    if job and (drop == true or drop == job) then return end
  end
  heldBullmqEvents[#heldBullmqEvents + 1] = {...}
end
local function holdBullmqEvents(drop)
  heldBullmqEvents = {}
  droppedBullmqEvents = drop
end
local function releaseBullmqEvents(keep)
  local held = heldBullmqEvents
  heldBullmqEvents, droppedBullmqEvents = nil, nil
  if not held then return end
  local written = {}
  for i = 1, #held do
    local event = held[i]
    local write = event[1] == 'XADD'
    if write then
      for j = 3, #event - 1 do
        if event[j] == 'jobId' then
          write = keep(string.sub(event[2], 1, #event[2] - ${JSON.stringify(EVENTS_SUFFIX.length)}), event[j + 1])
          break
        end
      end
    end
    if write then written[#written + 1] = event end
  end
  if #written == 0 then return end
  for i = 1, #held do
    if held[i][1] == 'XTRIM' then redis.call(unpack(held[i])) end
  end
  for i = 1, #written do redis.call(unpack(written[i])) end
end
`;
}

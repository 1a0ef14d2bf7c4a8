import { PUSH_ADD_KEYS } from './job-add';
import {
  BULLMQ_CHANGE_DELAY_KEYS,
  BULLMQ_FETCH_REPLY,
  BULLMQ_FINISH_ARGS,
  BULLMQ_FINISH_KEYS,
  BULLMQ_JOB_FIELDS,
  BULLMQ_JOB_LISTS,
  BULLMQ_SCORES,
  queueLoadKeys,
} from './layout';
import { bullmqEventsInclude, bullmqScript, withHeldEvents } from './scripts';

/**
 * The Lua includes through which storage's scripts reach BullMQ (`--- @include "bullmq-<name>"`,
 * inlined by storage/scripts/index.ts): BullMQ's scripts inlined under names of what they do,
 * and named accessors for its key names, job fields, reply layouts and scores, generated from
 * layout.ts. A script of ours calls these by name and spells none of BullMQ's. A text may name
 * the includes it needs (`--- @include` lines), which the loader inlines first, once per script.
 * `library`: the text is for the function library, whose top-level code runs once per server (see
 * `inlinedScript`). Throws for a name it does not know, or when the installed BullMQ lacks a script.
 */
export function bullmqInclude(name: string, library: boolean): string {
  const include = INCLUDES[name];
  if (!include) throw new Error(`no BullMQ include bullmq-${name}`);
  return include(library);
}

const lua = (value: string) => JSON.stringify(value);
const luaList = (names: readonly string[]) => `{ ${names.map(lua).join(', ')} }`;
const requires = (...names: string[]) => names.map((name) => `--- @include "bullmq-${name}"\n`).join('');

/** Lua's index of a 0-based position. */
const at1 = (position: number) => position + 1;

const INCLUDES: Record<string, ((library: boolean) => string) | undefined> = {
  events: () => bullmqEventsInclude(),

  keys: () => `-- BullMQ's keys of a queue for one of its scripts (bullmq/lua.ts, from bullmq/layout.ts and job-add.ts):
-- the queue's prefix followed by each name of a list ('' stands for the job's id, \`jobId\`). Built
-- once per prefix and list, and kept: building 9 or 14 names on every call cost a push about 4.5
-- µs and a completing claim about 3.9 µs. A call gets a copy of its own, as a script gets KEYS.
local BULLMQ_KEY_LISTS = {
  finish = ${luaList(BULLMQ_FINISH_KEYS)},
  standard = ${luaList(PUSH_ADD_KEYS.standard)},
  delayed = ${luaList(PUSH_ADD_KEYS.delayed)},
  reschedule = ${luaList(BULLMQ_CHANGE_DELAY_KEYS)},
}
local builtBullmqKeys = {}
--- @memo builtBullmqKeys (a queue's names are the same whichever call builds them)
local function bullmqKeys(prefix, list, jobId)
  local ofList = builtBullmqKeys[list]
  if not ofList then
    ofList = {}
    builtBullmqKeys[list] = ofList
  end
  local built = ofList[prefix]
  if not built then
    local names = BULLMQ_KEY_LISTS[list]
    built = {}
    for i = 1, #names do
      built[i] = prefix .. names[i]
      if names[i] == '' then built.jobAt = i end
    end
    ofList[prefix] = built
  end
  local keys = {unpack(built)}
  if built.jobAt then keys[built.jobAt] = prefix .. jobId end
  return keys
end
`,

  job: () => `-- A BullMQ job as its hash and lists tell it (bullmq/lua.ts, from bullmq/layout.ts).
-- Where bullmqJobPlace finds a job: its active list, its delayed set, or where a worker fetches it.
local BULLMQ_ACTIVE, BULLMQ_DELAYED, BULLMQ_WAITING = 'active', 'delayed', 'waiting'
-- The name, end time (false while it has not ended) and data of the job \`jobId\` on the queue
-- whose prefix is \`prefix\`: one HMGET.
local function bullmqJob(prefix, jobId)
  local job = redis.call('HMGET', prefix .. jobId, ${lua(BULLMQ_JOB_FIELDS.name)}, ${lua(BULLMQ_JOB_FIELDS.finishedOn)}, ${lua(BULLMQ_JOB_FIELDS.data)})
  return job[1], job[2], job[3]
end
-- The name of the job \`jobId\` (false when it has no hash).
local function bullmqJobName(prefix, jobId)
  return redis.call('HGET', prefix .. jobId, ${lua(BULLMQ_JOB_FIELDS.name)})
end
-- Where the job \`jobId\` is: BULLMQ_ACTIVE, BULLMQ_DELAYED and its delayed score, or BULLMQ_WAITING;
-- with \`verify\`, BULLMQ_WAITING only where a worker fetches it (its wait list, prioritized set, or a
-- paused queue's list), else false; without, any job neither active nor delayed is taken as
-- waiting. One LPOS and one ZSCORE; with \`verify\` one ZSCORE and two LPOS more.
local function bullmqJobPlace(prefix, jobId, verify)
  if redis.call('LPOS', prefix .. ${lua(BULLMQ_JOB_LISTS.active)}, jobId) then return BULLMQ_ACTIVE end
  local score = redis.call('ZSCORE', prefix .. ${lua(BULLMQ_JOB_LISTS.delayed)}, jobId)
  if score then return BULLMQ_DELAYED, score end
  if not verify
    or redis.call('ZSCORE', prefix .. ${lua(BULLMQ_JOB_LISTS.prioritized)}, jobId)
    or redis.call('LPOS', prefix .. ${lua(BULLMQ_JOB_LISTS.wait)}, jobId)
    or redis.call('LPOS', prefix .. ${lua(BULLMQ_JOB_LISTS.paused)}, jobId) then
    return BULLMQ_WAITING
  end
  return false
end
`,

  scores: () => `-- How BullMQ scores its delayed set (bullmq/lua.ts, from bullmq/layout.ts BULLMQ_SCORES).
-- The highest delayed score of a job due at or before \`ms\`.
local function bullmqDueScore(ms) return (ms + 1) * ${BULLMQ_SCORES.delayed} - 1 end
`,

  load: () => `--- @include "bullmq-scores"
-- What a queue's load is read from (bullmq/lua.ts, from bullmq/layout.ts).
-- The queue's lists from a script's KEYS, as bullmq/layout.ts queueLoadKeys orders them: its wait
-- list, active list, delayed set and prioritized set, and the prefix of a job's hash.
local function bullmqLoadLists(keys) return ${queueLoadKeys({ wait: 'keys[1]', active: 'keys[2]', delayed: 'keys[3]', prioritized: 'keys[4]', jobPrefix: 'keys[5]' }).join(', ')} end
-- The lowest and highest score of a job of BullMQ priority \`priority\` in the prioritized set.
local function bullmqPriorityScores(priority)
  return priority * ${BULLMQ_SCORES.priority}, (priority + 1) * ${BULLMQ_SCORES.priority} - 1
end
-- The BullMQ priority of the job \`jobId\` (0: none).
local function bullmqJobPriority(prefix, jobId)
  return tonumber(redis.call('HGET', prefix .. jobId, ${lua(BULLMQ_JOB_FIELDS.priority)}) or '0')
end
`,

  fetched: () => `-- BullMQ's reply to a fetch (bullmq/lua.ts, from bullmq/layout.ts BULLMQ_FETCH_REPLY).
-- The job a fetch reply names: its id (nil when none), name, data and whether BullMQ deferred a
-- failure to this fetch (its stalled check gave up on it: the worker fails it unrun).
local function bullmqFetchedJob(reply)
  local fields = type(reply) == 'table' and reply[${at1(BULLMQ_FETCH_REPLY.fields)}]
  if type(fields) ~= 'table' then return nil end
  local name, data, failing
  for i = 1, #fields, 2 do
    local field = fields[i]
    if field == ${lua(BULLMQ_JOB_FIELDS.name)} then
      name = fields[i + 1]
    elseif field == ${lua(BULLMQ_JOB_FIELDS.data)} then
      data = fields[i + 1]
    elseif field == ${lua(BULLMQ_JOB_FIELDS.deferredFailure)} then
      failing = true
    end
  end
  return reply[${at1(BULLMQ_FETCH_REPLY.jobId)}], name, data, failing
end
-- Carries \`value\` in a fetch reply after BullMQ's own elements (bullmq/layout.ts fetchReplyOf reads it).
local function bullmqCarry(reply, value) reply[${at1(BULLMQ_FETCH_REPLY.carried)}] = value end
`,

  fetch: (
    library,
  ) => `${requires('events', 'fetched')}-- BullMQ's fetch (its moveToActive, inlined): bullmqFetch(KEYS, ARGV), as BullMQ's backend sends it.
${inlinedScript('moveToActive', 'bullmqFetch', library)}`,

  complete: (
    library,
  ) => `${requires('events', 'keys', 'fetched')}-- BullMQ's completion (its moveToFinished, inlined): bullmqComplete(KEYS, ARGV), as BullMQ's
-- backend sends it; its reply carries the next job it fetched, if it fetched one.
${inlinedScript('moveToFinished', 'bullmqComplete', library)}
-- The queue prefix and the id of the job a completion's arguments complete, read from \`args\`
-- where they start at \`at\`.
local function bullmqCompletedJob(args, at)
  return args[at + ${BULLMQ_FINISH_ARGS.prefix}], args[at + ${BULLMQ_FINISH_ARGS.jobId}]
end
`,

  adds: (
    library,
  ) => `${requires('events', 'keys')}-- BullMQ's adds of a job (addStandardJob, addDelayedJob, addPrioritizedJob, inlined), by the kind
-- BullMQ's Job.addJob chose (bullmq/job-add.ts).
${inlinedScript('addStandardJob', 'bullmqAddStandardJob', library)}
${inlinedScript('addDelayedJob', 'bullmqAddDelayedJob', library)}
${inlinedScript('addPrioritizedJob', 'bullmqAddPrioritizedJob', library)}
local BULLMQ_STANDARD_ADD, BULLMQ_DELAYED_ADD = 'standard', 'delayed'
local BULLMQ_ADDS = { standard = bullmqAddStandardJob, delayed = bullmqAddDelayedJob, prioritized = bullmqAddPrioritizedJob }
-- Makes BullMQ's add of kind \`kind\` with its keys and arguments; returns its reply (the job's id).
local function bullmqAdd(kind, keys, args)
  local add = BULLMQ_ADDS[kind]
  if not add then error('batch-by-key: no BullMQ add ' .. tostring(kind)) end
  return add(keys, args)
end
`,

  reschedule: (library) => `${requires('events', 'keys')}-- BullMQ's changeDelay, inlined.
${inlinedScript('changeDelay', 'bullmqChangeDelay', library)}
-- Moves the delayed job \`jobId\` of the queue whose prefix is \`prefix\` to start \`delayMs\` after
-- \`nowMs\`, as BullMQ's Job.changeDelay does (bullmq \`src/commands/changeDelay-4.lua\`'s ARGV).
local function bullmqReschedule(prefix, jobId, delayMs, nowMs)
  bullmqChangeDelay(bullmqKeys(prefix, 'reschedule'), {delayMs, nowMs, jobId, prefix .. jobId})
end
`,
};

/**
 * BullMQ's Lua script `script` as the installed package ships it, whole, as a Lua function `fn`
 * of its KEYS and ARGV, its event-stream writes held (scripts.ts `withHeldEvents`). Taken from
 * the installed package at load time, so it is always the version whose backend builds its
 * arguments. In the library, its helper functions are built once (see `bullmqDefinitions`).
 */
function inlinedScript(script: string, fn: string, library: boolean): string {
  const content = withHeldEvents(script, bullmqScript(script).content);
  return `${INLINED_FROM}${script}\n${asFunction(content, fn, library)}${INLINED_TO}${script}\n`;
}

/** The lines around each of BullMQ's scripts inlined (for a reader of the library, and the test that skips them). */
export const INLINED_FROM = '-- BullMQ script, as its package ships it: ';
export const INLINED_TO = '-- end of BullMQ script ';

function asFunction(content: string, fn: string, library: boolean): string {
  const split = library ? bullmqDefinitions(content) : undefined;
  if (!split) return `local function ${fn}(KEYS, ARGV)\n${content}\nend\n`;
  // In the library, the script's helper functions are built once, in a scope of their own (no
  // name of theirs meets one of ours); its body, the rest, runs per call. moveToFinished defines
  // 42 of them, about 4.6 µs of every EVALSHA of it.
  // `redis.call` cannot be read while a library loads: `rcall` is declared there and set per call.
  const RCALL = /^local rcall = redis\.call\s*$/m;
  const definitions = split.definitions.replace(RCALL, 'local rcall');
  const setRcall = RCALL.test(split.definitions) ? 'rcall = redis.call\n' : '';
  return `local ${fn}\ndo\n${definitions}\n${fn} = function(KEYS, ARGV)\n${setRcall}${split.body}\nend\nend\n`;
}

/**
 * Where one of BullMQ's scripts stops defining functions: its leading block of `local function`
 * (or `local name = function`) definitions, comments and `local rcall = redis.call`, up to its
 * first other top-level line. Undefined when that block is empty or its code reads KEYS or ARGV
 * (it could then not be built once for every call). BullMQ's compiled scripts end each
 * top-level function at an `end` in column 0, which is what this reads.
 * @internal (exported for the test that holds it to the installed BullMQ)
 */
export function bullmqDefinitions(content: string): { definitions: string; body: string } | undefined {
  const lines = content.split('\n');
  let inFunction = false;
  let inComment = false;
  let at = -1;
  for (const [i, line] of lines.entries()) {
    if (inComment) {
      inComment = !line.includes(']]');
    } else if (inFunction) {
      inFunction = !/^end\b/.test(line);
    } else if (line.startsWith('--[[')) {
      inComment = !line.includes(']]', 4);
    } else if (/^\s*(--.*)?$/.test(line) || /^local rcall = redis\.call\s*$/.test(line)) {
      continue;
    } else if (/^local (function [A-Za-z_]\w*|[A-Za-z_]\w* = function)\b/.test(line)) {
      inFunction = !/\bend\s*$/.test(line);
    } else {
      at = i;
      break;
    }
  }
  if (at <= 0) return undefined;
  const definitions = lines.slice(0, at).join('\n');
  const code = definitions.replace(/--\[\[[\s\S]*?\]\]/g, '').replace(/--[^\n]*/g, '');
  if (/\b(KEYS|ARGV)\b/.test(code) || !/\bfunction\b/.test(code)) return undefined;
  return { definitions, body: lines.slice(at).join('\n') };
}

/** Every include `bullmqInclude` knows, by name (for the tests that read them all). @internal */
export const BULLMQ_INCLUDES: readonly string[] = Object.keys(INCLUDES);

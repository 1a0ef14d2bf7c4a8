import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Cluster, type ChainableCommander } from 'ioredis';
import { isReplyError } from '../../core/redis-errors';
import { VERSION } from '../../core/version';
import { MAX_CONCURRENCY_PER_KEY, MAX_RETRYING_SLICES, RETRY_AFTER_FLOOR_MS, RETRY_AFTER_MAX_BACKOFF_MS } from '../../core/limits';
import {
  BULLMQ_FINISH_KEYS,
  BULLMQ_CHANGE_DELAY_KEYS,
  BULLMQ_JOB_LISTS,
  BULLMQ_DEFERRED_FAILURE,
  JOB_POINTER,
  JOB_NAME,
  KEY_SUFFIXES,
  LANE_NAMES,
  TICKET_ERRORS_SUFFIX,
  TICKET_CHANNEL_SUFFIX,
} from '../keys';
import { CLAIM_REPLY_HEAD, REPLY } from '../replies';
import { argsInclude } from './args';

import { bullmqEventsInclude, bullmqScript, PUSH_ADD_KEYS, withHeldEvents } from '../../bullmq';
import type { RedisClient } from '../../core/connection';

export type { RedisClient };

/** One name per `.lua` file beside this module. */
const NAMES = [
  'push',
  'push-many',
  'backlog-check',
  'add-job',
  'claim',
  'claim-and-finish',
  'fetch-and-claim',
  'release',
  'fail-slice',
  'due-in',
  'forget-key',
  'forget-pointers',
  'dead-add',
  'dead-undo',
  'dead-trim',
  'dead-remove',
  'seal-ticket',
  'queue-load',
  'history-tick',
  'history-append',
  'reads',
  'pause-key',
  'resume-key',
  'agree',
  'forget-shard-count',
  'limits-enter',
  'limits-leave',
  'limits-renew',
  'limits-hold',
  'limits-read',
  'limits-changed',
  'limits-restamp',
] as const;

export type ScriptName = (typeof NAMES)[number];

const INCLUDE = /^--- @include "([a-z-]+)"$/gm;

/**
 * Inlines includes. Each include lands once per script, where it is first named, so includes
 * may name what they need (the clock, say) without defining it twice.
 */
function load(file: string, chain: ReadonlySet<string> = new Set(), included = new Set<string>(), library = false): string {
  return inline(readFileSync(join(__dirname, file), 'utf8'), chain, included, library);
}

/**
 * A script's text with its includes inlined (see `load`); `library`: for the function library,
 * whose top-level code runs once per server (see `bullmqInclude`).
 */
function inline(source: string, chain: ReadonlySet<string>, included: Set<string>, library = false): string {
  return source.replace(INCLUDE, (_line, name: string) => {
    if (chain.has(name)) throw new Error(`script include cycle at ${name}`);
    if (included.has(name)) return '';
    included.add(name);
    if (name === BULLMQ_EVENTS) return bullmqEventsInclude();
    if (name.startsWith(BULLMQ))
      return inline(`--- @include "${BULLMQ_EVENTS}"\n`, chain, included) + bullmqInclude(name.slice(BULLMQ.length), library);
    if (name === 'keyspace') return keyspaceInclude();
    if (name.startsWith(ARGS)) return argsInclude(name.slice(ARGS.length));
    if (name.startsWith(SCRIPT)) return scriptInclude(name.slice(SCRIPT.length), chain, included, library);
    return load(join('includes', `${name}.lua`), new Set([...chain, name]), included, library);
  });
}

/** `args-<script>`: the script's arguments by name, generated from args.ts. */
const ARGS = 'args-';

/**
 * `script-<name>`: another script of ours as a function, so a script can run it per item of its
 * call (push-many.lua runs push.lua once per push): that script's includes, then its body as
 * `local function <name>Script(KEYS, ARGV)`, whose KEYS and ARGV are the item's. The script's
 * `return`s return from the function.
 */
const SCRIPT = 'script-';

function scriptInclude(name: string, chain: ReadonlySet<string>, included: Set<string>, library: boolean): string {
  const { prelude, body } = splitScript(readFileSync(join(__dirname, `${name}.lua`), 'utf8'));
  const inner = new Set([...chain, `${SCRIPT}${name}`]);
  const fn = `${name.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase())}Script`;
  return `${inline(prelude, inner, included, library)}\nlocal function ${fn}(KEYS, ARGV)\n${inline(body, inner, included)}\nend\n`;
}

/**
 * Includes that are not files here: `bullmq-<script>` is the installed BullMQ's script of that
 * name (kebab-case), whole, as a Lua function of its KEYS and ARGV named `bullmq<Script>`. Taken
 * from the installed package at load time, so it is always the version whose backend builds its
 * arguments (see engine/finisher.ts and storage/job.ts).
 */
const BULLMQ = 'bullmq-';

/**
 * `bullmq-events`: how BullMQ's scripts inlined here write their queue's event stream (see
 * bullmq/scripts.ts `bullmqEventsInclude`), included before the first of them.
 */
const BULLMQ_EVENTS = 'bullmq-events';

function bullmqInclude(kebab: string, library: boolean): string {
  const name = kebab.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
  const fn = `bullmq${name[0]!.toUpperCase()}${name.slice(1)}`;
  const content = withHeldEvents(name, bullmqScript(name).content);
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

/**
 * The names a claim reads whatever the key uses (a one-id key's run reads these and no other; a
 * push, four of them): `keyNames` builds them at once, as plain fields. Any other is built when
 * first read, through a metatable, a Lua function call each: a perf profile of a drain of one-id
 * keys put those calls at about 8 % of redis-server's CPU when every name was built so.
 */
const EAGER_NAMES = [
  'pending',
  'inFlight',
  'lock',
  'lastClaim',
  'pushMarks',
  'inFlightMark',
  'extras',
] as const satisfies readonly (keyof typeof KEY_SUFFIXES)[];

/**
 * The `keyspace` include, generated from keys.ts and the constants the scripts share with this
 * code, so that neither spells a name or a limit the other could drift from: `keyNames(base,
 * lane)` is `laneNames(keyspace.forKey(key), lane)` from the key's base, and `keyBase(root,
 * encoded)` is that base from the batcher's root and the key as `encodeKey` encodes it.
 * @internal (exported for the test that holds both sides to one another)
 */
export function keyspaceInclude(): string {
  const lua = (value: string) => JSON.stringify(value);
  const suffixes = Object.entries(KEY_SUFFIXES)
    .map(([field, suffix]) => `${field} = ${lua(suffix)}`)
    .join(', ');
  const lanes = new Set<string>(LANE_NAMES);
  const eager = EAGER_NAMES.map((field) => `${field} = base .. ${lua(KEY_SUFFIXES[field])}${lanes.has(field) ? ' .. l' : ''}`).join(', ');
  return [
    '-- Generated from storage/keys.ts and core/limits.ts (see scripts/index.ts).',
    `local JOB_NAME, MAX_RETRYING_SLICES, OTHER_LANES = ${lua(JOB_NAME)}, ${MAX_RETRYING_SLICES}, ${MAX_CONCURRENCY_PER_KEY - 1}`,
    `local RETRY_AFTER_FLOOR_MS, RETRY_AFTER_MAX_BACKOFF_MS = ${RETRY_AFTER_FLOOR_MS}, ${RETRY_AFTER_MAX_BACKOFF_MS}`,
    `local KEY_SUFFIXES = { ${suffixes} }`,
    `local REPLY = { ${Object.entries(REPLY)
      .map(([name, code]) => `${name} = ${code}`)
      .join(', ')} }`,
    `local CLAIM_REPLY_HEAD, TICKET_ERRORS_SUFFIX, TICKET_CHANNEL_SUFFIX = ${CLAIM_REPLY_HEAD}, ${lua(TICKET_ERRORS_SUFFIX)}, ${lua(TICKET_CHANNEL_SUFFIX)}`,
    `local LANE_NAMES = { ${LANE_NAMES.map(lua).join(', ')} }`,
    `local BULLMQ_FINISH_KEYS = { ${BULLMQ_FINISH_KEYS.map(lua).join(', ')} }`,
    `local BULLMQ_PUSH_ADD_KEYS = { ${Object.entries(PUSH_ADD_KEYS)
      .map(([kind, names]) => `${kind} = { ${names.map(lua).join(', ')} }`)
      .join(', ')} }`,
    `local BULLMQ_JOB_LISTS = { ${Object.entries(BULLMQ_JOB_LISTS)
      .map(([field, name]) => `${field} = ${lua(name)}`)
      .join(', ')} }`,
    'local function keyBase(root, encoded) return root .. ":{" .. encoded .. "}" end',
    '-- The encoded key of a base (an encoded key holds no braces, and a root none either).',
    "local function encodedKeyOf(base) return string.match(base, '{([^{}]*)}$') end",
    `local BULLMQ_CHANGE_DELAY_KEYS = { ${BULLMQ_CHANGE_DELAY_KEYS.map(lua).join(', ')} }`,
    `local JOB_POINTER, BULLMQ_DEFERRED_FAILURE = ${lua(JOB_POINTER)}, ${lua(BULLMQ_DEFERRED_FAILURE)}`,
    '-- A key as keys.ts encodeKey encodes it (encodeURIComponent): every byte of its UTF-8 but the',
    "-- unreserved ASCII ones as %XX, in capitals (Redis's Lua runs in the C locale: %w is ASCII).",
    '-- Most keys need no escape: a find spares them the closure and the string gsub would build.',
    'local function encodeKey(key)',
    '  if not string.find(key, "[^%w%-_%.!~%*\'%(%)]") then return key end',
    "  return (string.gsub(key, \"[^%w%-_%.!~%*'%(%)]\", function(c) return string.format('%%%02X', string.byte(c)) end))",
    'end',
    '-- The names every claim reads are built at once (EAGER_NAMES in scripts/index.ts); any other',
    '-- when first read. A field with no suffix is a bug: it fails.',
    'local LANE_FIELD = {}',
    '-- A numeric loop: while Redis 7.0 loads a library of functions, its code sees no global but `redis`.',
    'for i = 1, #LANE_NAMES do LANE_FIELD[LANE_NAMES[i]] = true end',
    'local KEY_NAMES = { __index = function(names, field)',
    '  local suffix = KEY_SUFFIXES[field]',
    "  if not suffix then error('batch-by-key: no key name ' .. tostring(field)) end",
    '  local name = rawget(names, 1) .. suffix',
    "  if LANE_FIELD[field] and rawget(names, 2) > 0 then name = name .. ':' .. rawget(names, 2) end",
    '  rawset(names, field, name)',
    '  return name',
    'end }',
    'local function keyNames(base, lane)',
    "  local l = lane > 0 and (':' .. lane) or ''",
    `  return setmetatable({ base, lane, base = base, ${eager} }, KEY_NAMES)`,
    'end',
    '',
  ].join('\n');
}

/**
 * The scripts of the fast path, which inline BullMQ's fetch and completion (moveToActive,
 * moveToFinished): the only ones a worker can do without (it then runs BullMQ's own, see
 * engine/finisher.ts). When the installed BullMQ has not the scripts they inline, they are left
 * out of the library and the commands, so every other script still runs, and `fastScriptsProblem`
 * says why for the worker's self-check.
 */
const FAST_PATH: ReadonlySet<ScriptName> = new Set(['claim-and-finish', 'fetch-and-claim']);

/** Why each fast-path script could not be built, by name. */
const unbuilt = new Map<ScriptName, string>();

/** `build()`, or undefined, for a fast-path script whose build failed (see FAST_PATH). */
function built<T>(name: ScriptName, build: () => T): T | undefined {
  try {
    return build();
  } catch (err) {
    if (!FAST_PATH.has(name)) throw err;
    unbuilt.set(name, err instanceof Error ? err.message : String(err));
    return undefined;
  }
}

/** Why the fast path's scripts cannot run with the installed BullMQ, if they cannot (see FAST_PATH). */
export function fastScriptsProblem(): string | undefined {
  scriptLibrary();
  const [first] = unbuilt;
  return first && `${first[0]}.lua cannot be built: ${first[1]}`;
}

let sources: Map<ScriptName, string> | undefined;

/** Read once per process; ioredis then sends each by SHA and handles NOSCRIPT after a Redis restart. */
function allSources(): Map<ScriptName, string> {
  if (sources) return sources;
  sources = new Map();
  for (const name of NAMES) {
    const source = built(name, () => load(`${name}.lua`));
    if (source !== undefined) sources.set(name, source);
  }
  return sources;
}

/**
 * A script's source as its command runs it (includes inlined).
 * @internal (exported for the bench's script microbenchmark)
 */
export function scriptSource(name: ScriptName): string {
  return allSources().get(name)!;
}

/**
 * The text of a script file (`.lua` beside this module), edited or not, with its includes inlined
 * as `load` inlines them: the bench builds a script's prelude from it (see bench/lib/prelude.ts).
 * @internal (exported for the bench's script microbenchmark)
 */
export function inlineIncludes(source: string): string {
  return inline(source, new Set(), new Set());
}

/** The command name carries the version, so two library versions on one Redis never run each other's scripts. */
function commandName(name: ScriptName): string {
  return `bbk_${VERSION.replace(/\W/g, '_')}_${name.replace(/-/g, '_')}`;
}

/** Each script's command name, built once: a run's claim looked it up on every call. */
const COMMAND_NAMES = new Map(NAMES.map((name) => [name, commandName(name)]));

/**
 * Scripts that only read: their functions are flagged `no-writes`, so Redis runs them when it is
 * out of memory (as it ran them by EVALSHA), where it refuses a function that may write before it
 * starts.
 */
const READ_ONLY: ReadonlySet<ScriptName> = new Set(['due-in', 'queue-load', 'reads', 'backlog-check', 'limits-read']);

/**
 * A line of an include that resets state of its own that lives for one call (the clock, read once
 * per call): `--- @per-call <Lua statement>`, after that state's declaration. A script sent by EVALSHA builds its includes anew on every call; a
 * library of functions builds them once, when Redis loads it, so each function runs these
 * statements, of the includes its script names before its first line of code, first thing.
 */
const PER_CALL = /^--- @per-call (.+)$/gm;

/**
 * A script's source in two: its prelude, up to its last `--- @include` line before its first line
 * of code (the includes a library builds once), and its body, the rest (run on every call, with
 * any include inside it).
 * @internal (exported for the test that reads it)
 */
export function splitScript(source: string): { prelude: string; body: string } {
  const lines = source.split('\n');
  let end = 0;
  let inComment = false;
  for (const [i, line] of lines.entries()) {
    if (inComment) {
      inComment = !line.includes(']]');
    } else if (line.startsWith('--[[')) {
      inComment = !line.includes(']]', 4);
    } else if (line.startsWith('--- @include ')) {
      end = i + 1;
    } else if (line.trim() !== '' && !line.startsWith('--')) {
      break;
    }
  }
  return { prelude: lines.slice(0, end).join('\n'), body: lines.slice(end).join('\n') };
}

/** Stands for the library's name in its functions' names until the source, hashed, names it. */
const LIBRARY_NAME = '@library@';

/**
 * One script as a block of the library: its prelude's includes, built once (a `do` block of its
 * own, so Lua's 200 locals per function count per script), and a function of Redis whose call
 * sets KEYS and ARGV (includes read them, as they do when EVAL runs them), resets the per-call
 * state, and runs the body.
 */
function functionBlock(name: ScriptName): string {
  const included = new Set<string>();
  const { prelude, body } = splitScript(readFileSync(join(__dirname, `${name}.lua`), 'utf8'));
  const head = inline(prelude, new Set(), included, true);
  const rest = inline(body, new Set(), included);
  const resets = [...head.matchAll(PER_CALL)].map((m) => `  ${m[1]}`);
  const flags = READ_ONLY.has(name) ? ", flags = { 'no-writes' }" : '';
  return [
    `do -- ${name}.lua`,
    'local KEYS, ARGV',
    head,
    'local function main()',
    rest,
    'end',
    `redis.register_function{ function_name = '${LIBRARY_NAME}_${name.replace(/-/g, '_')}'${flags}, callback = function(keys, args)`,
    '  KEYS, ARGV = keys, args',
    ...resets,
    '  local reply = main()',
    '  KEYS, ARGV = nil, nil',
    '  return reply',
    'end }',
    'end',
  ].join('\n');
}

interface Library {
  name: string;
  source: string;
  functions: ReadonlyMap<ScriptName, string>;
}

let library: Library | undefined;

/**
 * Every script as one library of Redis functions, built once per process. Its name carries the
 * package version, as the commands' names do, and a hash of its source: function names are global
 * to a Redis, and two processes of one version may inline different BullMQ patch versions.
 * @internal (exported for the tests)
 */
export function scriptLibrary(): Library {
  if (library) return library;
  const blocks = new Map<ScriptName, string>();
  for (const name of NAMES) {
    const block = built(name, () => functionBlock(name));
    if (block !== undefined) blocks.set(name, block);
  }
  const text = [...blocks.values()].join('\n');
  const hash = createHash('sha1').update(text).digest('hex').slice(0, 10);
  const name = `bbk_${VERSION.replace(/\W/g, '_')}_${hash}`;
  const header = [`#!lua name=${name}`, '-- batch-by-key: each script of src/storage/scripts as a function (see scripts/index.ts).'];
  library = {
    name,
    source: [...header, text.replaceAll(LIBRARY_NAME, name), ''].join('\n'),
    functions: new Map([...blocks.keys()].map((script) => [script, `${name}_${script.replace(/-/g, '_')}`])),
  };
  return library;
}

type Caller = Record<string, ((...args: ScriptArg[]) => unknown) | undefined>;

/**
 * How a client runs the scripts: `functions` once the library is loaded (FCALL), `evalsha` on a
 * Redis without functions (before 7.0) or where loading or calling them is refused for good (no such command,
 * no permission). Until it is known, `pending` is the look and load under way, and a load Redis
 * refused for now (out of memory, say) leaves the client on EVALSHA until `evalshaUntil`.
 */
interface ClientScripts {
  mode?: 'functions' | 'evalsha';
  pending?: Promise<void>;
  evalshaUntil: number;
  /** A reload after Redis lost the library (a restart, FUNCTION FLUSH), shared by the calls that found it gone. */
  reloading?: Promise<void>;
}

const clients = new WeakMap<object, ClientScripts>();

/** How long a client runs scripts by EVALSHA after Redis refused to load the library for now, before it tries again. */
const LOAD_RETRY_MS = 10_000;

/**
 * Forces EVALSHA on clients whose mode is decided after it is set: for the tests of that path
 * (CI runs Redis 7). Not an option: a Redis without functions is found out by itself.
 * @internal
 */
export const FORCE_EVALSHA_ENV = 'BATCH_BY_KEY_FORCE_EVALSHA';

/**
 * Registers every script on a client (once) as an ioredis command, for EVALSHA. Whether the
 * client runs them as functions instead is found on its first call (see `runScript`).
 */
export function defineScripts(client: RedisClient): void {
  if (clients.has(client)) return;
  for (const [name, lua] of allSources()) {
    client.defineCommand(commandName(name), { lua });
  }
  clients.set(client, { evalshaUntil: 0 });
}

/** How `client` runs the scripts (undefined until its first call decided it). @internal */
export function scriptMode(client: RedisClient): 'functions' | 'evalsha' | undefined {
  return clients.get(client)?.mode;
}

/** The client's command for a script (unbound: call it with the client as `this`). */
function command(target: object, name: ScriptName): (...args: ScriptArg[]) => unknown {
  const fn = (target as Caller)[COMMAND_NAMES.get(name)!];
  if (fn === undefined) throw new Error(`script ${name} is not defined on this client: call defineScripts first`);
  return fn;
}

/** A script argument as ioredis sends it (BullMQ's packed options are a Buffer). */
export type ScriptArg = string | number | Buffer;

/**
 * Runs a script. Keys are given by the caller (built by `Keyspace`); a script builds a name only
 * from a prefix it was given (a lane's keys, a ticket's hash, a key's dead letters), which shares
 * that prefix's hash tag, so every script touches one Redis Cluster slot. (push.lua also reads
 * BullMQ's keys and a job's hash, but only on a standalone server, where slots do not exist;
 * queue-load.lua and add-job.lua read only BullMQ's, which share the queue's slot.)
 *
 * On Redis 7.0 or later the call is an FCALL of the script's function in the library (see
 * `scriptLibrary`), whose includes Redis built once, at load; before, an EVALSHA, which builds
 * them on every call. ioredis routes either by its first key on a Cluster. A function Redis no
 * longer has (a restart without persistence, FUNCTION FLUSH, a new master) is loaded again on
 * every master, and the call sent once more: it did not run.
 */
export function runScript(client: RedisClient, name: ScriptName, keys: readonly string[], args: readonly ScriptArg[]): Promise<unknown> {
  const state = clients.get(client);
  if (!state) throw new Error(`script ${name} is not defined on this client: call defineScripts first`);
  if (state.mode === 'functions') return callFunction(client, state, name, keys, args);
  if (state.mode === 'evalsha' || Date.now() < state.evalshaUntil) return evalsha(client, name, keys, args);
  state.pending ??= decide(client, state).finally(() => (state.pending = undefined));
  return state.pending.then(() => runScript(client, name, keys, args));
}

function evalsha(client: RedisClient, name: ScriptName, keys: readonly string[], args: readonly ScriptArg[]): Promise<unknown> {
  return command(client, name).call(client, keys.length, ...keys, ...args) as Promise<unknown>;
}

function fcall(client: RedisClient, name: ScriptName, keys: readonly string[], args: readonly ScriptArg[]): Promise<unknown> {
  const fn = scriptLibrary().functions.get(name);
  if (fn === undefined) throw new Error(`batch-by-key: ${fastScriptsProblem() ?? `no script ${name}`}`);
  return client.fcall(fn, keys.length, ...keys, ...args);
}

async function callFunction(
  client: RedisClient,
  state: ClientScripts,
  name: ScriptName,
  keys: readonly string[],
  args: readonly ScriptArg[],
): Promise<unknown> {
  try {
    return await fcall(client, name, keys, args);
  } catch (err) {
    if (!isReplyError(err)) throw err;
    const message = (err as Error).message;
    // Refused, the call did not run: the client goes by EVALSHA for good, as after a refused load.
    if (FCALL_REFUSED.test(message)) {
      state.mode = 'evalsha';
      return evalsha(client, name, keys, args);
    }
    if (!FUNCTION_MISSING.test(message)) throw err;
  }
  state.reloading ??= loadLibrary(client, state, true).finally(() => (state.reloading = undefined));
  await state.reloading;
  return state.mode === 'functions' ? fcall(client, name, keys, args) : evalsha(client, name, keys, args);
}

/**
 * Queues a script's FCALL on `transaction` (a MULTI of `client`) if `client` runs the scripts as
 * functions, and says whether it did; else (EVALSHA, or not decided yet) queues nothing. A function
 * Redis lost fails at the transaction's EXEC, after the commands queued before it ran: see
 * `lostFunction`.
 */
export function queueScript(
  client: RedisClient,
  transaction: ChainableCommander,
  name: ScriptName,
  keys: readonly string[],
  args: readonly ScriptArg[],
): boolean {
  const fn = clients.get(client)?.mode === 'functions' ? scriptLibrary().functions.get(name) : undefined;
  if (fn === undefined) return false;
  transaction.fcall(fn, keys.length, ...keys, ...args);
  return true;
}

/**
 * Whether `err`, the reply of a script queued by `queueScript`, says Redis lost the library; if so,
 * the library is loaded again for the calls that follow (as `runScript` does).
 */
export function lostFunction(client: RedisClient, err: unknown): boolean {
  const state = clients.get(client);
  if (!state || !isReplyError(err) || !FUNCTION_MISSING.test((err as Error).message)) return false;
  state.reloading ??= loadLibrary(client, state, true).finally(() => (state.reloading = undefined));
  state.reloading.catch(() => undefined);
  return true;
}

/** What Redis answers a call of a function, or a library, it does not have. */
const FUNCTION_MISSING = /Function not found|Library .*not found/i;

/**
 * Redis refused FCALL itself, whatever it was asked to call: a renamed or disabled command, or a
 * user the ACL denies it but not FUNCTION (the load went through). Not a user denied a key: that
 * one's EVALSHA is refused too, and its error is the call's.
 */
const FCALL_REFUSED = /unknown command 'fcall'|NOPERM.*'fcall' command/i;

/**
 * Redis has no functions (before 7.0: no FUNCTION command; a proxy that does not pass it on), or
 * the user may not load them (ACL).
 */
const NO_FUNCTIONS = /unknown command|unknown subcommand|not supported|unsupported|NOPERM/i;

/** How long a Cluster master may take to answer a load before it counts as not reached (one that is down may never answer). */
const NODE_LOAD_TIMEOUT_MS = 10_000;

/** Decides a client's mode: EVALSHA when forced, else the library's load tells (see `loadLibrary`). */
async function decide(client: RedisClient, state: ClientScripts): Promise<void> {
  if (process.env[FORCE_EVALSHA_ENV]) {
    state.mode = 'evalsha';
    return;
  }
  await loadLibrary(client, state, false);
}

/**
 * Loads the library on the client's server, or on every master of a Cluster (each keeps its own;
 * replicas get it from their master, and a restarted Redis from its RDB or AOF): with `replace`,
 * always (it was found missing); else only where it is not loaded yet (the name carries the
 * source's hash: a library of that name is this one), so that a process start neither makes
 * Redis compile it again nor appends it to the AOF. A Redis before 7.0 answers the first FUNCTION
 * with an unknown command: the client then runs its scripts by EVALSHA for good, as it does when
 * its user may not load functions. A load refused for now (out of memory, say) leaves the client
 * on EVALSHA until LOAD_RETRY_MS later. A master that cannot be reached is left out (calls there
 * fail, as they would have, and load it when it is back).
 */
async function loadLibrary(client: RedisClient, state: ClientScripts, replace: boolean): Promise<void> {
  const { name, source } = scriptLibrary();
  const cluster = client instanceof Cluster;
  // A Cluster knows its masters once it is ready (a command waits for that, as a script call would).
  if (cluster && client.status !== 'ready') await client.ping();
  // Its masters connect when first used; one being reconnected is down.
  const nodes = cluster ? client.nodes('master').filter((node) => !['reconnecting', 'close', 'end'].includes(node.status)) : [client];
  const results = await Promise.allSettled(
    nodes.map((node) => {
      const loading = (async () => {
        if (!replace && ((await node.call('FUNCTION', 'LIST', 'LIBRARYNAME', name)) as unknown[]).length > 0) return;
        await node.call('FUNCTION', 'LOAD', 'REPLACE', source);
      })();
      return cluster ? withTimeout(loading, NODE_LOAD_TIMEOUT_MS) : loading;
    }),
  );
  const refused = results.find((r): r is PromiseRejectedResult => r.status === 'rejected' && isReplyError(r.reason));
  if (refused) {
    if (NO_FUNCTIONS.test((refused.reason as Error).message)) {
      state.mode = 'evalsha';
    } else {
      state.mode = undefined;
      state.evalshaUntil = Date.now() + LOAD_RETRY_MS;
    }
    return;
  }
  // Not one master reached: the call fails as it would have.
  const [first] = results;
  if (!first) throw new Error('batch-by-key: no Redis master to load the scripts on');
  if (results.every((r) => r.status === 'rejected')) throw (first as PromiseRejectedResult).reason;
  state.mode = 'functions';
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

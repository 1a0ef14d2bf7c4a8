import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { VERSION } from '../../core/version';
import { MAX_CONCURRENCY_PER_KEY, MAX_RETRYING_SLICES, RETRY_AFTER_FLOOR_MS, RETRY_AFTER_MAX_BACKOFF_MS } from '../../core/limits';
import {
  BULLMQ_ADD_KEYS,
  BULLMQ_FINISH_KEYS,
  BULLMQ_PUSH_READS,
  JOB_NAME,
  KEY_SUFFIXES,
  LANE_NAMES,
  SPARE_DEDUP_PREFIX,
  TICKET_ERRORS_SUFFIX,
} from '../keys';
import { CLAIM_REPLY_HEAD, REPLY } from '../replies';

import type { RedisClient } from '../../core/connection';

export type { RedisClient };

/** One name per `.lua` file beside this module. */
const NAMES = [
  'push',
  'add-job',
  'claim',
  'fetch',
  'release',
  'fail-slice',
  'due-in',
  'forget-key',
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
] as const;

export type ScriptName = (typeof NAMES)[number];

const INCLUDE = /^--- @include "([a-z-]+)"$/gm;

/**
 * Inlines includes. Each include lands once per script, where it is first named, so includes
 * may name what they need (the clock, say) without defining it twice.
 */
function load(file: string, chain: ReadonlySet<string> = new Set(), included = new Set<string>()): string {
  const source = readFileSync(join(__dirname, file), 'utf8');
  return source.replace(INCLUDE, (_line, name: string) => {
    if (chain.has(name)) throw new Error(`script include cycle at ${name}`);
    if (included.has(name)) return '';
    included.add(name);
    if (name.startsWith(BULLMQ)) return bullmqInclude(name.slice(BULLMQ.length));
    if (name === 'keyspace') return keyspaceInclude();
    return load(join('includes', `${name}.lua`), new Set([...chain, name]), included);
  });
}

/**
 * Includes that are not files here: `bullmq-<script>` is the installed BullMQ's script of that
 * name (kebab-case), whole, as a Lua function of its KEYS and ARGV named `bullmq<Script>`. Taken
 * from the installed package at load time, so it is always the version whose backend builds its
 * arguments (see engine/finisher.ts and storage/job.ts).
 */
const BULLMQ = 'bullmq-';

function bullmqInclude(kebab: string): string {
  const name = kebab.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
  const fn = `bullmq${name[0]!.toUpperCase()}${name.slice(1)}`;
  return `local function ${fn}(KEYS, ARGV)\n${bullmqScript(name).content}\nend\n`;
}

/** One of the installed BullMQ's Lua scripts, by its name (`moveToFinished`): its source and how many keys it takes. */
export function bullmqScript(name: string): { content: string; keys: number } {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- BullMQ's script sources have no typed export.
  const scripts = require('bullmq/dist/cjs/scripts') as Record<string, { content: string; keys: number } | undefined>;
  const script = scripts[name];
  if (!script) throw new Error(`the installed BullMQ has no script ${name}`);
  return script;
}

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
  return [
    '-- Generated from storage/keys.ts and core/limits.ts (see scripts/index.ts).',
    `local JOB_NAME, MAX_RETRYING_SLICES, OTHER_LANES = ${lua(JOB_NAME)}, ${MAX_RETRYING_SLICES}, ${MAX_CONCURRENCY_PER_KEY - 1}`,
    `local RETRY_AFTER_FLOOR_MS, RETRY_AFTER_MAX_BACKOFF_MS = ${RETRY_AFTER_FLOOR_MS}, ${RETRY_AFTER_MAX_BACKOFF_MS}`,
    `local KEY_SUFFIXES = { ${suffixes} }`,
    `local REPLY = { ${Object.entries(REPLY)
      .map(([name, code]) => `${name} = ${code}`)
      .join(', ')} }`,
    `local CLAIM_REPLY_HEAD, TICKET_ERRORS_SUFFIX = ${CLAIM_REPLY_HEAD}, ${lua(TICKET_ERRORS_SUFFIX)}`,
    `local LANE_NAMES = { ${LANE_NAMES.map(lua).join(', ')} }`,
    `local BULLMQ_FINISH_KEYS = { ${BULLMQ_FINISH_KEYS.map(lua).join(', ')} }`,
    `local BULLMQ_ADD_KEYS = { ${BULLMQ_ADD_KEYS.map(lua).join(', ')} }`,
    `local BULLMQ_PUSH_READS = { ${Object.entries(BULLMQ_PUSH_READS)
      .map(([field, name]) => `${field} = ${lua(name)}`)
      .join(', ')} }`,
    'local function keyBase(root, encoded) return root .. ":{" .. encoded .. "}" end',
    '-- The encoded key of a base (an encoded key holds no braces, and a root none either).',
    "local function encodedKeyOf(base) return string.match(base, '{([^{}]*)}$') end",
    `local SPARE_DEDUP_PREFIX = ${lua(SPARE_DEDUP_PREFIX)}`,
    "-- The encoded key of a key job's deduplication id, its own or its spare (keys.ts dedupIdsOf).",
    'local function encodedKeyOfDedupId(id)',
    '  if string.sub(id, 1, #SPARE_DEDUP_PREFIX) == SPARE_DEDUP_PREFIX then return string.sub(id, #SPARE_DEDUP_PREFIX + 1) end',
    '  return id',
    'end',
    '-- A name is built when first read: a claim reads about half of them, and a one-id run builds',
    "-- names for two keys (its own and the next job's). A field with no suffix is a bug: it fails.",
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
    'local function keyNames(base, lane) return setmetatable({ base, lane, base = base }, KEY_NAMES) end',
    '',
  ].join('\n');
}

let sources: Map<ScriptName, string> | undefined;

/** Read once per process; ioredis then sends each by SHA and handles NOSCRIPT after a Redis restart. */
function allSources(): Map<ScriptName, string> {
  sources ??= new Map(NAMES.map((name) => [name, load(`${name}.lua`)]));
  return sources;
}

/** The command name carries the version, so two library versions on one Redis never run each other's scripts. */
function commandName(name: ScriptName): string {
  return `bbk_${VERSION.replace(/\W/g, '_')}_${name.replace(/-/g, '_')}`;
}

/** Each script's command name, built once: a run's claim looked it up on every call. */
const COMMAND_NAMES = new Map(NAMES.map((name) => [name, commandName(name)]));

type Caller = Record<string, ((...args: ScriptArg[]) => unknown) | undefined>;

const defined = new WeakSet<object>();

/** Registers every script on a client (once) so it can be called there and in its pipelines. */
export function defineScripts(client: RedisClient): void {
  if (defined.has(client)) return;
  for (const [name, lua] of allSources()) {
    client.defineCommand(commandName(name), { lua });
  }
  defined.add(client);
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
 */
export function runScript(client: RedisClient, name: ScriptName, keys: readonly string[], args: readonly ScriptArg[]): Promise<unknown> {
  return command(client, name).call(client, keys.length, ...keys, ...args) as Promise<unknown>;
}

import { addKeysDerivable, BULLMQ_JOB_LISTS, buildAdd, bullmqScript, type JobsOptions, type Queue } from '../bullmq';
import { bullmqCall, type BullmqCall, type PushAdd } from './protocol';
import { runScript, type RedisClient } from './scripts';
import { argv } from './scripts/args';
import { JOB_NAME } from './keys';
import { isHighKey } from '../core/priority';
import type { Key, KeyJobData, Logger, Priority } from '../core/types';

/**
 * BullMQ's adds of a key's job (by the name its backend calls each; no key job has a parent),
 * as add-job.lua names them, with how many keys each takes: then come three arguments, its packed
 * arguments, the job's data and its packed options.
 */
const ADDS = new Map<string, { kind: AddKind; keys: number }>([
  ['addStandardJob', { kind: 'standard', keys: bullmqScript('addStandardJob').keys }],
  ['addDelayedJob', { kind: 'delayed', keys: bullmqScript('addDelayedJob').keys }],
  ['addPrioritizedJob', { kind: 'prioritized', keys: bullmqScript('addPrioritizedJob').keys }],
]);
const ADD_ARGS = 3;

type AddKind = 'standard' | 'delayed' | 'prioritized';

export { JOB_NAME } from './keys';

/** The queue of a batcher's key jobs. */
export type KeyQueue = Queue<KeyJobData, void, string>;

/**
 * Fair scheduling's levels, as BullMQ priorities (see scheduling.ts). Workers take BullMQ's wait
 * list (priority 0) first, FIFO, then the prioritized set by priority, FIFO within one. The wait
 * list is the first level, where aging lifts jobs. Without `priority(key)` it is the light keys'
 * level too; a batcher with one ranks its keys: the wait list is its high keys' lane, before
 * every normal key's, and its normal keys' levels are one further down (see `LEVELS`).
 */
export const WAIT_LIST = 0;

/** A level of a key that `priority(key)` does not make high. */
export type LevelName = 'light' | 'heavy' | 'hadTurn';

/** A BullMQ priority: `WAIT_LIST` or one of `LEVELS`'. */
export type Level = number;

/** Normal keys' levels, without (`plain`) and with `priority(key)` (`ranked`). */
const LEVELS: Readonly<Record<'plain' | 'ranked', Readonly<Record<LevelName, Level>>>> = {
  /**
   * `light`: a new job whose first push fits in one slice, or one back from a wait; `heavy`: a new
   * job whose first push is bigger than a slice; `hadTurn`: a job whose run used its turn (its
   * budget, or its quantum before it was preempted).
   */
  plain: { light: WAIT_LIST, heavy: 1, hadTurn: 2 },
  ranked: { light: 1, heavy: 2, hadTurn: 3 },
};

/** A batcher's normal keys' levels: ranked when it has `priority(key)`. */
export function levelsOf(priority: ((key: Key) => Priority) | undefined): Readonly<Record<LevelName, Level>> {
  return priority ? LEVELS.ranked : LEVELS.plain;
}

/** A batcher's levels in BullMQ's prioritized set, from the first: what aging looks at. */
export function prioritizedLevels(priority: ((key: Key) => Priority) | undefined): Level[] {
  return Object.values(levelsOf(priority)).filter((level) => level !== WAIT_LIST);
}

/**
 * A batcher's level of a key's job: `priority(key)`'s high keys (when it has one) wait in the
 * wait list whatever `level`, the others at `level` of their batcher's levels.
 */
export type KeyLevel = (key: Key, level: LevelName) => Level;

export function keyLevels(priority: ((key: Key) => Priority) | undefined, logger: Logger): KeyLevel {
  const levels = levelsOf(priority);
  return (key, level) => (isHighKey(key, priority, logger) ? WAIT_LIST : levels[level]);
}

/**
 * BullMQ's key names fair scheduling reads (queue-load.lua), from BullMQ's own `queue.keys`, never
 * spelled here: its wait, active, delayed and prioritized structures, and the prefix of a job's hash.
 */
export function bullKeysOf(queue: KeyQueue): { wait: string; active: string; delayed: string; prioritized: string; jobPrefix: string } {
  const keys = queue.keys;
  return { wait: keys.wait!, active: keys.active!, delayed: keys.delayed!, prioritized: keys.prioritized!, jobPrefix: queue.toKey('') };
}

/** The states a key's job is in until it ends (a paused queue's jobs count as waiting). */
export const LIVE_STATES = ['waiting', 'prioritized', 'delayed', 'active'] as const;

/** The keys of up to `limit` key jobs on `queue` that have not ended (each job's data is read). */
export async function liveJobKeys(queue: KeyQueue, limit: number): Promise<Key[]> {
  const jobs = await queue.getJobs([...LIVE_STATES], 0, limit - 1, true);
  return jobs.flatMap((job) => (job?.name === JOB_NAME && typeof job.data?.key === 'string' ? [job.data.key] : []));
}

/**
 * BullMQ's queue prefix (`prefix:name:`), when BullMQ names the keys a push reads under it as
 * push.lua derives them (its job lists, keys.ts BULLMQ_JOB_LISTS; a job's hash the prefix and the
 * job id); undefined when the installed BullMQ names them
 * otherwise, and then pushes take the general path (the job added after the push).
 */
export function queuePrefixOf(queue: KeyQueue): string | undefined {
  if (!prefixes.has(queue)) {
    const keys = queue.keys;
    const prefix = queue.toKey('');
    prefixes.set(queue, Object.entries(BULLMQ_JOB_LISTS).every(([field, name]) => keys[field] === prefix + name) ? prefix : undefined);
  }
  return prefixes.get(queue);
}

/** A queue's names never change: checked once per queue, not per push. */
const prefixes = new WeakMap<KeyQueue, string | undefined>();

/** Whether a queue's adds of each kind a push makes have the keys push.lua derives (see pushAdd). */
const addsDerivable = new WeakMap<KeyQueue, Partial<Record<PushAdd['kind'], boolean>>>();

/**
 * The options of a key's job: retries are ours, per slice. One job per key is ours too: the Lua
 * that sends the add adds it only where the key's job pointer names no job of the key's (see
 * scripts/includes/key-job.lua).
 */
function jobOptions(delayMs: number, level: Level): JobsOptions {
  return {
    delay: delayMs,
    ...(level !== WAIT_LIST && { priority: level }),
    // A run never fails for a slice.
    attempts: 1,
    removeOnComplete: true,
    removeOnFail: { count: 1000 },
  };
}

/** BullMQ's add of a key's job, built by BullMQ but not sent (see `capturedAdd`). */
interface CapturedAdd {
  kind: AddKind;
  call: BullmqCall;
  /** Takes the reply of the script that made the add as BullMQ's, and resolves when BullMQ has read it. */
  done: (reply: unknown) => Promise<void>;
}

/**
 * BullMQ's add of the key's job, built by BullMQ (its `Job.addJob`) but not sent: which add
 * script BullMQ chose and its call (keys and arguments), for a script of ours to make inside its
 * own call. Undefined when BullMQ did not build one of the adds it knows at once: then nothing
 * is sent or pending.
 */
function capturedAdd(queue: KeyQueue, key: Key, delayMs: number, level: Level): CapturedAdd | undefined {
  let captured: { kind: AddKind; call: BullmqCall } | undefined;
  let answer!: (reply: unknown) => void;
  const reply = new Promise<unknown>((resolve) => (answer = resolve));
  const added = buildAdd(queue, JOB_NAME, { key }, jobOptions(delayMs, level), (command, flat) => {
    const add = ADDS.get(command.slice(0, command.indexOf(':')));
    if (add && flat.length === add.keys + ADD_ARGS) captured = { kind: add.kind, call: bullmqCall(flat, add.keys) };
    return reply;
  });
  if (!captured) {
    answer(null);
    added.catch(() => undefined);
    return undefined;
  }
  return {
    ...captured,
    done: async (result) => {
      answer(result);
      await added;
    },
  };
}

/**
 * Adds the key's job at `level` unless it has one. An existing delayed job (backing off, or
 * waiting for a zset time) is moved to `delayMs`: for new ids that are ready now, that brings it
 * forward. One call (add-job.lua), which reads and writes the key's job pointer as push.lua does,
 * so no job not ours is taken for the key's job or moved. Returns the id of the key's job.
 */
export async function ensureJob(client: RedisClient, queue: KeyQueue, key: Key, delayMs: number, level: Level): Promise<string> {
  const add = capturedAdd(queue, key, delayMs, level);
  if (!add) throw new Error(`the installed BullMQ builds no add of a job that batch-by-key knows`);
  const args = argv('add-job', { add: add.kind, queuePrefix: queue.toKey(''), key, delayMs }, add.call.args);
  const reply = await runScript(client, 'add-job', add.call.keys, args);
  await add.done(reply);
  return String(reply);
}

/**
 * BullMQ's add of the key's job for a push to make in its own script call (push.lua), built by
 * BullMQ (`capturedAdd`) but not sent: at `level`, its standard add of a job that may start now
 * (`delayMs` 0, the wait list), or its delayed add of one that waits `delayMs` (a key waiting to
 * fill its maxWaitMs). `done` takes that script's reply as BullMQ's and resolves when BullMQ has
 * read it. Undefined when BullMQ did not build one of these at once, or builds its keys otherwise
 * than push.lua derives them (checked at a queue's first add of each kind, not per push): then
 * nothing is sent or pending, and the caller adds the job the usual way.
 */
export function pushAdd(
  queue: KeyQueue,
  key: Key,
  delayMs: number,
  level: Level,
): (PushAdd & { done: (reply: unknown) => Promise<void> }) | undefined {
  let derivable = addsDerivable.get(queue);
  if (!derivable) addsDerivable.set(queue, (derivable = {}));
  // BullMQ adds a job with a delay by its delayed add (Job.addJob): known not to fit, it is not built.
  if (derivable[delayMs > 0 ? 'delayed' : 'standard'] === false) return undefined;
  const add = capturedAdd(queue, key, delayMs, level);
  if (!add) return undefined;
  const kind = add.kind === 'prioritized' ? undefined : add.kind;
  if (kind && derivable[kind] === undefined) {
    const prefix = queuePrefixOf(queue);
    derivable[kind] = prefix !== undefined && addKeysDerivable({ kind, call: add.call }, prefix);
  }
  if (!kind || !derivable[kind]) {
    void add.done(null).catch(() => undefined);
    return undefined;
  }
  return { kind, call: add.call, done: add.done };
}

/**
 * The batcher-wide protocol: one verb per Lua script that reads or writes a batcher's own keys
 * (its dead letters, its history, its index of keys) or BullMQ's queue, each building its key
 * array from the names keys.ts gives, as protocol.ts does for one key's scripts. The engine and
 * ops call verbs, never scripts with positional keys.
 */
import { queueLoadKeys, type QueueLists } from '../bullmq';
import type { Key } from '../core/types';
import type { DeadNames, HistoryNames } from './keys';
import { callScript, runScript, type RedisClient } from './scripts';

/** dead-add.lua's answer: per id, its field, the letter it replaced ('' for none) and the letter it wrote. */
export type WrittenLetters = readonly string[];

/** The dead ids of one failed slice, as dead-add.lua stores them. */
export interface DeadLettersCall {
  encodedKey: string;
  key: Key;
  attempts: number;
  firstFailedAt: number;
  failedAt: number;
  /** JSON { name, message, stack }. */
  error: string;
  ids: readonly string[];
  /** Per id, the JSON array of its payloads ('' for none). */
  payloads: readonly string[];
  /** Per id, its own error as JSON (ids failed by `ctx.fail`); absent: each records `error`. */
  errors?: readonly string[];
}

const deadKeys = (n: DeadNames): string[] => [n.entries, n.byTime, n.byAttempts, n.ofKey];

/** Writes a failed slice's dead letters (see dead-add.lua): what it wrote and what it replaced. */
export async function addDeadLetters(client: RedisClient, names: DeadNames, c: DeadLettersCall): Promise<WrittenLetters> {
  const named = {
    encodedKey: c.encodedKey,
    key: c.key,
    attempts: c.attempts,
    firstFailedAt: c.firstFailedAt,
    lastFailedAt: c.failedAt,
    error: c.error,
    count: c.ids.length,
  };
  return (await callScript(client, 'dead-add', deadKeys(names), named, [...c.ids, ...c.payloads, ...(c.errors ?? [])])) as WrittenLetters;
}

/** Takes back what `addDeadLetters` wrote, where it is still what was written (see dead-undo.lua). */
export async function undoDeadLetters(client: RedisClient, names: DeadNames, written: WrittenLetters): Promise<void> {
  await runScript(client, 'dead-undo', deadKeys(names), written);
}

/** Evicts the oldest letters past `max` (see dead-trim.lua): how many went. */
export async function trimDeadLetters(client: RedisClient, names: DeadNames, max: number): Promise<number> {
  return Number(await runScript(client, 'dead-trim', [...deadKeys(names), names.evicted], [max]));
}

/**
 * Removes letters given as field, time pairs (see dead-remove.lua); `onlyUnchanged`: only those
 * not failed again since that time. How many went.
 */
export async function removeDeadLetters(
  client: RedisClient,
  names: DeadNames,
  fieldsAndTimes: readonly (string | number)[],
  onlyUnchanged: boolean,
): Promise<number> {
  return Number(await runScript(client, 'dead-remove', deadKeys(names), [onlyUnchanged ? '1' : '0', ...fieldsAndTimes]));
}

/**
 * Lists `key` in its recovery index, for a path that may leave its ids with no job (a run that
 * failed or was handed back; a push lists its key itself, see push.lua): the next recovery sweep
 * looks at it.
 */
export async function listForRecovery(client: RedisClient, index: string, key: Key): Promise<void> {
  await client.zadd(index, Date.now(), key);
}

/** Drops `key` from the recovery index if its score is still the one seen (see forget-key.lua). */
export async function forgetKey(client: RedisClient, index: string, key: Key, seenScore: string): Promise<void> {
  await runScript(client, 'forget-key', [index], [key, seenScore]);
}

/**
 * Deletes those of `pointers` (job pointers under the queue prefix `queuePrefix`, with their keys)
 * that name no live job of their key's (forget-pointers.lua); returns the keys whose pointer went.
 */
export async function forgetDeadPointers(
  client: RedisClient,
  queuePrefix: string,
  pointers: readonly { name: string; key: Key }[],
): Promise<Key[]> {
  if (pointers.length === 0) return [];
  const reply = await runScript(
    client,
    'forget-pointers',
    pointers.map((pointer) => pointer.name),
    [queuePrefix, ...pointers.map((pointer) => pointer.key)],
  );
  return (reply as string[]).map(String);
}

/** BullMQ's keys the scheduler reads (bullmq/layout.ts). */
export type { QueueLists };

/**
 * Jobs waiting in the wait list, and at `light` (normal light keys' BullMQ priority; 0: they wait
 * in the wait list, and `waitingLight` is 0), due delayed jobs included (at most `dueLookedAt` of
 * them per queue), and jobs active, summed over the batcher's shard queues: one call per queue,
 * whose BullMQ keys share one slot (see queue-load.lua).
 */
export async function queueLoad(
  client: RedisClient,
  queues: readonly QueueLists[],
  dueLookedAt: number,
  light: number,
): Promise<{ waiting: number; waitingLight: number; active: number }> {
  const loads = await Promise.all(
    queues.map(
      async (lists) =>
        (await runScript(client, 'queue-load', queueLoadKeys(lists), [Date.now(), dueLookedAt, light])) as [number, number, number],
    ),
  );
  const sum = (at: number) => loads.reduce((total, load) => total + load[at]!, 0);
  return { waiting: sum(0), active: sum(1), waitingLight: sum(2) };
}

/**
 * Counts ids processed here since the last tick, and claims the interval's sample for this
 * process if no other did (see history-tick.lua): Redis's now and the total processed.
 */
export async function historyTick(
  client: RedisClient,
  names: HistoryNames,
  processedHere: number,
  intervalMs: number,
  retentionMs: number,
): Promise<{ claimed: boolean; at: number; processed: number }> {
  const [claimed, at, processed] = (await callScript(client, 'history-tick', [names.claim, names.processed], {
    processedHere,
    intervalMs,
    retentionMs,
  })) as [number, number, number];
  return { claimed: claimed === 1, at, processed };
}

/** Appends a claimed interval's sample, keeping `kept` (see history-append.lua): whether it was appended. */
export async function historyAppend(
  client: RedisClient,
  names: HistoryNames,
  sample: string,
  intervalMs: number,
  kept: number,
  retentionMs: number,
): Promise<boolean> {
  return (await callScript(client, 'history-append', [names.series], { sample, intervalMs, kept, retentionMs })) === 1;
}

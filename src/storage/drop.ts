import { Cluster } from 'ioredis';
import { queuePrefix } from '../bullmq';
import { jobPointerOf, type KeyNames } from './keys';
import { runScript, type RedisClient } from './scripts';
import type { KeyQueue } from './job';
import type { Key, StoreKind } from '../core/types';

/** What drop.lua removed from a key, and what its caller has left to do. */
export interface DroppedKey {
  pending: number;
  inFlight: number;
  retrying: number;
  tickets: number;
  /** Tickets the drop settled that want a callback (in the key's outbox). */
  settled: string[];
  /** The job the key's pointer named, to remove if it still waits; undefined: none. */
  jobId: string | undefined;
}

/**
 * Drops a key's backlog in one call in its slot (see drop.lua). On a standalone server that call
 * also deletes the key's job pointer and its recovery index entry. On a Cluster both live in
 * other slots, so the pointer is read before the call (the job it names is removed after, if it
 * still waits) and the index entry is left for the recovery sweep, which forgets an entry whose
 * key has nothing (recovery.ts). Removing it here could not be made safe: a push that listed the
 * key before the drop, stored its ids after it and found the old job waiting would be left with
 * neither a job nor an entry once that job is removed. Left listed, it gets a job within one
 * `recoveryIntervalMs`.
 */
export async function dropKey(
  client: RedisClient,
  store: StoreKind,
  names: KeyNames,
  key: Key,
  shard: { queue: KeyQueue; index: string },
): Promise<DroppedKey> {
  const pointer = jobPointerOf(queuePrefix(shard.queue), key);
  if (!(client instanceof Cluster)) return dropped(await runScript(client, 'drop', [names.base, pointer, shard.index], [store, key]));
  const jobId = await client.get(pointer);
  const reply = dropped(await runScript(client, 'drop', [names.base], [store, key]));
  return { ...reply, jobId: jobId ?? undefined };
}

function dropped(reply: unknown): DroppedKey {
  const [pending, inFlight, retrying, tickets, settled, jobId] = reply as [number, number, number, number, string, string];
  return {
    pending: Number(pending),
    inFlight: Number(inFlight),
    retrying: Number(retrying),
    tickets: Number(tickets),
    settled: settled === '' ? [] : settled.split(' '),
    jobId: jobId === '' ? undefined : jobId,
  };
}

import { Cluster } from 'ioredis';
import { queuePrefix } from '../bullmq';
import { forgetKey } from './batcher-protocol';
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
 * other slots: the pointer and the entry's score are read before the call, and the entry is
 * removed after it only if its score is still the one read (forget-key.lua): a push after the
 * drop lists its key again, and keeps its entry. The pointer is left (a pointer to a job that is
 * gone names no job; the recovery sweep's walk deletes it).
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
  const [jobId, score] = await Promise.all([client.get(pointer), client.zscore(shard.index, key)]);
  const reply = dropped(await runScript(client, 'drop', [names.base], [store, key]));
  if (score !== null) await forgetKey(client, shard.index, key, score);
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

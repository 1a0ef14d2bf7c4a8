import type { ChainableCommander } from 'ioredis';
import type { RetrySlice } from '../failures';
import { laneNames, type KeyNames } from '../keys';
import { MAX_CONCURRENCY_PER_KEY } from '../options';
import { runScript, ScriptStatus, type RedisClient } from '../scripts';
import type { Backlog, Id, StoreKind } from '../types';
import { listStore } from './list';
import { setStore } from './set';
import { zsetStore } from './zset';

/**
 * What the processor does with the ids of the previous slice when it claims the next one: ack
 * them (done), restore them to pending (a graceful stop), or, at a run's first claim, recover
 * what a dead run left in flight as a failed run of it.
 */
export type Settle = 'ack' | 'restore' | 'recover';

export type ClaimResult =
  | {
      held: true;
      ids: Id[];
      /** When nothing was claimed: ms until something is due (a zset time or a failed slice's backoff); 0 when nothing is left. */
      waitMs: number;
      /** Set when the ids are a failed slice run again. */
      retry?: RetrySlice;
      /** Ms the slice's oldest id waited before this claim (see `Store.pendingSince`), when known. */
      waitedMs?: number;
    }
  | { held: false };

/**
 * While this many failed slices of a key back off, the key claims no new pending ids: a key
 * whose every slice fails (an outage) waits for its retries instead of spending every id's
 * attempts, while one bad slice never holds back the rest.
 */
const MAX_RETRYING_SLICES = 10;

/**
 * One Redis structure per key for pending ids and one for in-flight ids. A store knows how to
 * push, claim (atomically, fenced by the lock), and count; everything else is shared.
 */
export interface Store {
  readonly kind: StoreKind;
  /** Queues the push commands for `ids` on a pipeline; the last one's reply is the wait in ms (zset) or unused. */
  push(pipeline: ChainableCommander, names: KeyNames, ids: readonly Id[], delayMs: number): void;
  /** Queues the push mark (for lag) once per push, after its ids, in the same transaction. */
  mark(pipeline: ChainableCommander, names: KeyNames, count: number): void;
  /** Commands that count pending and in-flight ids, in that order. */
  /** Queues the command that counts the ids of one of its structures (pending, or a lane's in-flight). */
  size(pipeline: ChainableCommander, key: string): void;
  /** A command whose reply `pendingSince` reads. */
  oldest(pipeline: ChainableCommander, names: KeyNames): void;
  /** When the oldest pending id was pushed (list), ready (zset), or no later than (set); undefined when unknown. */
  pendingSince(reply: unknown): number | undefined;
}

export function storeFor(kind: StoreKind): Store {
  switch (kind) {
    case 'list':
      return listStore;
    case 'set':
      return setStore;
    case 'zset':
      return zsetStore;
  }
}

/** Settles the previous slice and claims up to `count` ids (or a due failed slice), in one round trip. */
export async function claim(
  client: RedisClient,
  kind: StoreKind,
  names: KeyNames,
  lockValue: string,
  claimId: string,
  settle: Settle,
  count: number,
  /** With 'recover': recover lanes 1..n of a dead run too (lane 0's first claim). */
  otherLanes = 0,
): Promise<ClaimResult> {
  const reply = (await runScript(
    client,
    `claim-${kind}`,
    [
      names.pending,
      names.inFlight,
      names.lock,
      names.lastClaim,
      names.retry,
      names.retrySlices,
      names.tracked,
      names.trackedInFlight,
      names.ticketPrefix,
      names.pushMarks,
      names.inFlightMark,
      names.inFlightSlice,
    ],
    [lockValue, claimId, settle, count, MAX_RETRYING_SLICES, otherLanes],
  )) as [number, number, string, number, ...Id[]];
  if (reply[0] !== ScriptStatus.Ok) return { held: false };
  const ids = reply.slice(4) as Id[];
  return {
    held: true,
    waitMs: reply[1],
    ids,
    ...(reply[2] && { retry: JSON.parse(reply[2]) as RetrySlice }),
    ...(reply[3] >= 0 && { waitedMs: reply[3] }),
  };
}

/** Ms until the key has something to claim, as its claim would judge it; -1 for nothing at all. */
export async function dueIn(client: RedisClient, kind: StoreKind, names: KeyNames): Promise<number> {
  return Number(await runScript(client, 'due-in', [names.pending, names.retry], [kind, MAX_RETRYING_SLICES]));
}

export async function backlog(client: RedisClient, store: Store, names: KeyNames): Promise<Backlog> {
  const { pending, inFlight, retrying } = await readKey(client, store, names);
  return { pending, inFlight, retrying };
}

/**
 * A key's backlog and when its oldest pending id was pushed (see `Store.pendingSince`), in one
 * round trip, or two when lanes other than lane 0 hold slices (rare: they must be counted too,
 * or recovery would forget a key whose last ids are in a crashed run's lane).
 */
export async function readKey(client: RedisClient, store: Store, names: KeyNames): Promise<Backlog & { pendingSince: number | undefined }> {
  const otherLanes = Array.from({ length: MAX_CONCURRENCY_PER_KEY - 1 }, (_, i) => laneNames(names, i + 1).inFlight);
  const pipeline = client.pipeline();
  store.size(pipeline, names.pending);
  store.size(pipeline, names.inFlight);
  pipeline.hvals(names.retrySlices);
  store.oldest(pipeline, names);
  pipeline.exists(...otherLanes);
  const [pending, inFlight, slices, oldest, lanesInFlight] = await replies(pipeline);
  const retrying = (slices as string[]).reduce((sum, json) => sum + (JSON.parse(json) as RetrySlice).ids.length, 0);
  let inLanes = 0;
  if (Number(lanesInFlight) > 0) {
    const lanes = client.pipeline();
    for (const key of otherLanes) store.size(lanes, key);
    inLanes = (await replies(lanes)).reduce((sum: number, n) => sum + Number(n), 0);
  }
  return { pending: Number(pending), inFlight: Number(inFlight) + inLanes, retrying, pendingSince: store.pendingSince(oldest) };
}

async function replies(pipeline: ChainableCommander): Promise<unknown[]> {
  return ((await pipeline.exec()) ?? []).map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}

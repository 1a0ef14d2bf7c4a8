import type { ChainableCommander } from 'ioredis';
import type { KeyNames } from '../keys';
import { runScript, ScriptStatus, type RedisClient } from '../scripts';
import type { Backlog, Id, StoreKind } from '../types';
import { listStore } from './list';
import { setStore } from './set';
import { zsetStore } from './zset';

/** What the processor does with the ids of the previous slice when it claims the next one. */
export type Settle = 'ack' | 'restore';

export type ClaimResult =
  | { held: true; ids: Id[]; /** zset: ms until the earliest pending id is ready */ waitMs: number }
  | { held: false };

/**
 * One Redis structure per key for pending ids and one for in-flight ids. A store knows how to
 * push, claim (atomically, fenced by the lock), and count; everything else is shared.
 */
export interface Store {
  readonly kind: StoreKind;
  /** Queues the push commands for `ids` on a pipeline; the last one's reply is the wait in ms (zset) or unused. */
  push(pipeline: ChainableCommander, names: KeyNames, ids: readonly Id[], delayMs: number): void;
  /** Commands that count pending and in-flight ids, in that order. */
  count(pipeline: ChainableCommander, names: KeyNames): void;
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

/** Settles the previous slice and claims up to `count` ids, in one round trip. */
export async function claim(
  client: RedisClient,
  kind: StoreKind,
  names: KeyNames,
  lockValue: string,
  claimId: string,
  settle: Settle,
  count: number,
): Promise<ClaimResult> {
  const reply = (await runScript(
    client,
    `claim-${kind}`,
    [names.pending, names.inFlight, names.lock, names.lastClaim, names.failures],
    [lockValue, claimId, settle, count],
  )) as [number, number, ...Id[]];
  if (reply[0] !== ScriptStatus.Ok) return { held: false };
  return { held: true, waitMs: reply[1], ids: reply.slice(2) as Id[] };
}

export async function backlog(client: RedisClient, store: Store, names: KeyNames): Promise<Backlog> {
  const pipeline = client.pipeline();
  store.count(pipeline, names);
  const [pending, inFlight] = ((await pipeline.exec()) ?? []).map(([err, value]) => {
    if (err) throw err;
    return Number(value);
  });
  return { pending: pending ?? 0, inFlight: inFlight ?? 0 };
}

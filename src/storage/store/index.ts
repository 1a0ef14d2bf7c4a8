import { Cluster, type ChainableCommander } from 'ioredis';
import type { RetrySlice } from '../protocol';
import { laneInFlight, type KeyNames } from '../keys';
import { MAX_CONCURRENCY_PER_KEY } from '../../core/limits';
import { runScript, type RedisClient } from '../scripts';
import type { Backlog, StoreKind } from '../../core/types';
import { listStore } from './list';
import { setStore } from './set';
import type { Read, Store } from './store';
import { zsetStore } from './zset';

export type { Store } from './store';

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

export async function backlog(client: RedisClient, store: Store, names: KeyNames): Promise<Backlog> {
  const { pending, inFlight, retrying } = await readKey(client, store, names);
  return { pending, inFlight, retrying };
}

/** What `readKeys` tells of a key. */
export type KeyReading = Backlog & { pendingSince: number | undefined };

/** A key's backlog and when its oldest pending id was pushed (see `readKeys`). */
export async function readKey(client: RedisClient, store: Store, names: KeyNames): Promise<KeyReading> {
  return (await readKeys(client, store, [names]))[0]!;
}

/**
 * Keys' backlogs and when their oldest pending ids were pushed (see `Store.pendingSince`), both
 * levels of pending ids counted (a push's priority, see includes/priority.lua): seven reads per key, and a second, rare pass for keys whose lanes other than lane 0 hold slices
 * (they must be counted too, or recovery would forget a key whose last ids are in a crashed
 * run's lane). On a standalone server one script call runs them all (see reads.lua): stats()
 * reads thousands of keys, from worker processes too (history.ts). A Cluster's keys live in many
 * slots, so there each key's reads are a pipeline of their own.
 */
export async function readKeys(client: RedisClient, store: Store, keys: readonly KeyNames[]): Promise<KeyReading[]> {
  const lanesOf = (names: KeyNames) => Array.from({ length: MAX_CONCURRENCY_PER_KEY - 1 }, (_, i) => laneInFlight(names, i + 1));
  const perKey = (names: KeyNames): Read[] => [
    store.size(names.pending),
    store.size(names.inFlight),
    { command: 'HVALS', keys: [names.retrySlices] },
    store.oldest(names),
    { command: 'EXISTS', keys: lanesOf(names) },
    store.size(names.pendingHigh),
    store.oldest({ ...names, pending: names.pendingHigh, pushMarks: names.pushMarksHigh }),
  ];
  const reply = await run(client, keys.map(perKey));
  const readings = reply.map(([pending, inFlight, slices, oldest, lanesInFlight, pendingHigh, oldestHigh]) => ({
    pending: Number(pending) + Number(pendingHigh),
    inFlight: Number(inFlight),
    retrying: (slices as string[]).reduce((sum, json) => sum + (JSON.parse(json) as RetrySlice).ids.length, 0),
    pendingSince: earliest(store.pendingSince(oldest), store.pendingSince(oldestHigh)),
    lanes: Number(lanesInFlight) > 0,
  }));
  const inLanes = readings.flatMap((reading, k) => (reading.lanes ? [{ reading, names: keys[k]! }] : []));
  if (inLanes.length > 0) {
    const sizes = await run(
      client,
      inLanes.map(({ names }) => lanesOf(names).map((key) => store.size(key))),
    );
    for (const [i, { reading }] of inLanes.entries()) reading.inFlight += sizes[i]!.reduce((sum: number, n) => sum + Number(n), 0);
  }
  return readings.map(({ lanes: _lanes, ...reading }) => reading);
}

function earliest(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}

/** Runs groups of reads (a group's keys share a slot) and returns each group's replies. */
async function run(client: RedisClient, groups: readonly (readonly Read[])[]): Promise<unknown[][]> {
  if (client instanceof Cluster) return Promise.all(groups.map((reads) => pipelined(client, reads)));
  const keys: string[] = [];
  const args: (string | number)[] = [];
  for (const read of groups.flat()) {
    keys.push(...read.keys);
    args.push(read.command, read.keys.length, read.args?.length ?? 0, ...(read.args ?? []));
  }
  const flat = (await runScript(client, 'reads', keys, args)) as unknown[];
  let at = 0;
  return groups.map((reads) => flat.slice(at, (at += reads.length)));
}

async function pipelined(client: RedisClient, reads: readonly Read[]): Promise<unknown[]> {
  const pipeline = client.pipeline();
  for (const read of reads) pipeline.call(read.command, ...read.keys, ...(read.args ?? []));
  return replies(pipeline);
}

async function replies(pipeline: ChainableCommander): Promise<unknown[]> {
  return ((await pipeline.exec()) ?? []).map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}

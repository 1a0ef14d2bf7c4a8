import type { ChainableCommander } from 'ioredis';
import type { RetrySlice } from '../protocol';
import { laneNames, type KeyNames } from '../keys';
import { MAX_CONCURRENCY_PER_KEY } from '../../core/limits';
import type { RedisClient } from '../scripts';
import type { Backlog, StoreKind } from '../../core/types';
import { listStore } from './list';
import { setStore } from './set';
import type { Store } from './store';
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

import type { Keyspace } from './keys';
import type { RedisClient } from './scripts';
import type { Store } from './store';
import type { Batcher } from './types';

/** What the metrics read of a batcher beyond its public API; keyed by a symbol so it stays off the typed surface. */
export interface BatcherInternals {
  client: () => RedisClient;
  keyspace: Keyspace;
  store: Store;
}

export const INTERNALS = Symbol.for('batch-by-key.internals');

/** @internal */
export function internalsOf(batcher: Batcher): BatcherInternals {
  const internals = (batcher as unknown as Record<symbol, BatcherInternals | undefined>)[INTERNALS];
  if (!internals) throw new TypeError('not a batcher created by batch-by-key');
  return internals;
}

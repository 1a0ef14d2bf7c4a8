import type { Store } from './index';

/** Unordered, duplicates collapse: an id pushed while already pending is processed once. */
export const setStore: Store = {
  kind: 'set',
  push(pipeline, names, ids) {
    pipeline.sadd(names.pending, ...ids);
  },
  count(pipeline, names) {
    pipeline.scard(names.pending).scard(names.inFlight);
  },
};

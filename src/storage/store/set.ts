import type { Store } from './store';

/** Unordered, duplicates collapse: an id pushed while already pending is processed once. */
export const setStore: Store = {
  kind: 'set',
  size(pipeline, key) {
    pipeline.scard(key);
  },
  oldest(pipeline, names) {
    pipeline.get(names.pushMarks);
  },
  pendingSince: (reply) => (typeof reply === 'string' ? Number(reply) : undefined),
};

import { queueScript } from '../scripts';
import type { Store } from './index';

/** Unordered, duplicates collapse: an id pushed while already pending is processed once. */
export const setStore: Store = {
  kind: 'set',
  push(pipeline, names, ids) {
    pipeline.sadd(names.pending, ...ids);
  },
  mark(pipeline, names, count) {
    queueScript(pipeline, 'mark-push', [names.pushMarks], ['set', count]);
  },
  size(pipeline, key) {
    pipeline.scard(key);
  },
  oldest(pipeline, names) {
    pipeline.get(names.pushMarks);
  },
  pendingSince: (reply) => (typeof reply === 'string' ? Number(reply) : undefined),
};

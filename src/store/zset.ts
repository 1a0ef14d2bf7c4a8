import { queueScript } from '../scripts';
import type { Store } from './index';

/** Ready at a time (score, by the Redis clock); re-adding an id moves it (debounce). */
export const zsetStore: Store = {
  kind: 'zset',
  push(pipeline, names, ids, delayMs) {
    queueScript(pipeline, 'push-zset', [names.pending, names.retry], [delayMs, ...ids]);
  },
  // The scores are the ready times, by the Redis clock already.
  mark() {},
  size(pipeline, key) {
    pipeline.zcard(key);
  },
  oldest(pipeline, names) {
    pipeline.zrange(names.pending, 0, 0, 'WITHSCORES');
  },
  pendingSince: (reply) => (Array.isArray(reply) && reply.length === 2 ? Number(reply[1]) : undefined),
};


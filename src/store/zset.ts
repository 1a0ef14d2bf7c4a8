import { queueScript } from '../scripts';
import type { Store } from './index';

/** Ready at a time (score, by the Redis clock); re-adding an id moves it (debounce). */
export const zsetStore: Store = {
  kind: 'zset',
  push(pipeline, names, ids, delayMs) {
    queueScript(pipeline, 'push-zset', [names.pending, names.retry], [delayMs, ...ids]);
  },
  count(pipeline, names) {
    pipeline.zcard(names.pending).zcard(names.inFlight);
  },
};


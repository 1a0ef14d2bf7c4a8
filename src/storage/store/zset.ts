import type { Store } from './store';

/** Ready at a time (score, by the Redis clock); re-adding an id moves it (debounce). */
export const zsetStore: Store = {
  kind: 'zset',
  size: (key) => ({ command: 'ZCARD', keys: [key] }),
  members: (key) => ({ command: 'ZRANGE', keys: [key], args: [0, -1] }),
  oldest: (names) => ({ command: 'ZRANGE', keys: [names.pending], args: [0, 0, 'WITHSCORES'] }),
  pendingSince: (reply) => (Array.isArray(reply) && reply.length === 2 ? Number(reply[1]) : undefined),
};

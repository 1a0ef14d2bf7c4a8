import type { Store } from './store';

/** Unordered, duplicates collapse: an id pushed while already pending is processed once. */
export const setStore: Store = {
  kind: 'set',
  size: (key) => ({ command: 'SCARD', keys: [key] }),
  members: (key) => ({ command: 'SMEMBERS', keys: [key] }),
  oldest: (names) => ({ command: 'GET', keys: [names.pushMarks] }),
  pendingSince: (reply) => (typeof reply === 'string' ? Number(reply) : undefined),
};

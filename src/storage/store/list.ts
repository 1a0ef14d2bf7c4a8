import type { Store } from './store';

/** FIFO: RPUSH at the tail, claims LPOP from the head; a restored slice goes back to the head. */
export const listStore: Store = {
  kind: 'list',
  size: (key) => ({ command: 'LLEN', keys: [key] }),
  // The head entry dates the head id, the oldest pending one (see includes/marks.lua).
  members: (key) => ({ command: 'LRANGE', keys: [key], args: [0, -1] }),
  oldest: (names) => ({ command: 'LINDEX', keys: [names.pushMarks], args: [0] }),
  pendingSince: (reply) => (typeof reply === 'string' ? Number(reply.split(' ')[0]) : undefined),
};

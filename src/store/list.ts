import type { Store } from './index';

/** FIFO: RPUSH at the tail, claims LPOP from the head; a restored slice goes back to the head. */
export const listStore: Store = {
  kind: 'list',
  push(pipeline, names, ids) {
    pipeline.rpush(names.pending, ...ids);
  },
  count(pipeline, names) {
    pipeline.llen(names.pending).llen(names.inFlight);
  },
};

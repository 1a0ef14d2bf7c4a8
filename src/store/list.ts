import { probedPush, type Store } from './index';

/** FIFO: RPUSH at the tail, claims LPOP from the head; a restored slice goes back to the head. */
export const listStore: Store = {
  kind: 'list',
  push: probedPush('push-list'),
  count(pipeline, names) {
    pipeline.llen(names.pending).llen(names.inFlight);
  },
};

import type { KeyNames } from '../keys';
import { queueScript, runScript, type RedisClient } from '../scripts';
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

/** Ms until a zset key's job should run (its earliest id or failed slice); -1 if nothing is pending or backing off. */
export async function zsetReadyIn(client: RedisClient, names: KeyNames): Promise<number> {
  return Number(await runScript(client, 'push-zset', [names.pending, names.retry], [0]));
}

import type { Batcher } from '../../src';
import { queueOf, range, testBatcher, waitFor } from './redis';

/**
 * A batcher whose rate window (5 ids a minute) key a spent, with keys b and c refused by it and
 * waiting delayed for the minute (a's run waits too): what a change of the limits must wake.
 * `ran` holds the keys a slice ran for.
 */
export async function keysRefusedByTheWindow(): Promise<{ b: Batcher; ran: Set<string> }> {
  const ran = new Set<string>();
  const b = testBatcher({
    sliceSize: 5,
    globalRateLimit: { max: 5, durationMs: 60_000 },
    eachIteration: (_ids, ctx) => void ran.add(ctx.key),
  });
  b.createWorker({ concurrency: 4 });
  await b.performBatchLater(range(5), { key: 'a' });
  await waitFor(() => ran.has('a'), { what: 'key a to spend the window' });
  await b.performBatchLater(range(5), { key: 'b' });
  await b.performBatchLater(range(5), { key: 'c' });
  // Key a's run, its slice full, passes once more before it would find nothing, and waits too.
  await waitFor(async () => (await queueOf(b).getDelayedCount()) === 3, { what: 'keys b and c to be refused for a minute' });
  return { b, ran };
}

import { describe, expect, it } from 'vitest';
import { ClosedError, type Progress } from '../src';
import { keyspaceOf, range, redisClient, testBatcher, waitFor } from './helpers/redis';

/** `X.close()` against what is under way when it begins: the calls it lets finish, and the waits it ends. */
describe('X.close() and the calls under way', () => {
  it('a pause that close() overtakes resolves, and is applied', async () => {
    for (let run = 0; run < 3; run++) {
      const b = testBatcher({ eachIteration: () => {} });
      // The batcher's first call: its scripts' library is looked up (and loaded) first, round trips a close could overtake.
      const pausing = b.pause('k', { forMs: 60_000 });
      const closing = b.close();
      await expect(pausing).resolves.toBeUndefined();
      await closing;
      expect(await redisClient().exists(keyspaceOf(b).forKey('k').paused)).toBe(1);
    }
  });

  it('a waitFor pending at close() rejects with ClosedError', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const { ticket } = await b.performBatchLater(range(2), { key: 'k', track: true });
    let read = 0;
    const onProgress = () => void read++;
    const waits = [b.waitFor(ticket, { onProgress }), b.waitFor(ticket, { pollMs: 10, onProgress })].map((w) =>
      w.catch((e: unknown) => e as Error | Progress),
    );
    // Both are waiting (neither can end before a worker runs the ids).
    await waitFor(() => read === 2, { what: 'both waits to read once' });
    await b.close();
    for (const error of await Promise.all(waits)) {
      expect(error).toBeInstanceOf(ClosedError);
      expect(error).toMatchObject({ code: 'ERR_CLOSED', message: expect.stringMatching(/closed/) });
    }
  });
});

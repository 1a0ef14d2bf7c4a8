import { describe, expect, it } from 'vitest';
import { keyspaceOf, range, Recorder, redisClient, testBatcher, waitFor } from './helpers/redis';

/**
 * A plain key (a list key with no extras: see scripts/includes/extras.lua) takes push.lua's
 * straight-line path, and claim-key.lua's claims skip every read a key with extras needs (its
 * `quiet` and `plain`); a key with extras takes the general ones. A key moves between them
 * mid-run, and nothing of what a path keeps is lost on the way.
 */
describe('the plain path and the general path', () => {
  it('a key that gains an extra mid-run (a tracked push) is claimed by the general path: its ticket settles, every id runs once, in order', async () => {
    const rec = new Recorder();
    let pushed: Promise<{ ticket?: string }> | undefined;
    const b = testBatcher({
      sliceSize: 2,
      eachIteration: (ids, ctx) => {
        rec.handler(ids, ctx);
        // During the run's first slice: the key gains a ticket, and with it the extras mark.
        pushed ??= b.performBatchLater(['t1', 't2'], { key: ctx.key, track: true });
      },
    });
    await b.performBatchLater(range(6), { key: 'k' });
    b.createWorker();
    await waitFor(() => pushed, { what: 'the tracked push' });
    const { ticket } = await pushed!;
    expect(await b.waitFor(ticket!, { timeoutMs: 10_000 })).toMatchObject({ total: 2, done: 2, pending: 0 });
    await waitFor(() => rec.all.length === 8, { what: 'every id' });
    expect(rec.idsOf('k')).toEqual([...range(6), 't1', 't2']);
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  it('a key that loses its last extra (a failed slice that succeeds on retry) goes on plain, and drains whole', async () => {
    const rec = new Recorder();
    let failed = false;
    const b = testBatcher({
      sliceSize: 2,
      backoff: { type: 'fixed', delayMs: 50 },
      eachIteration: (ids, ctx) => {
        if (!failed && ids.includes('0')) {
          failed = true;
          throw new Error('once');
        }
        rec.handler(ids, ctx);
      },
    });
    await b.performBatchLater(range(8), { key: 'k' });
    b.createWorker();
    await waitFor(() => rec.all.length === 8, { what: 'every id, the failed slice retried' });
    expect([...rec.all].sort()).toEqual(range(8).sort());
    expect(new Set(rec.all).size).toBe(8);
    await waitFor(async () => (await b.backlog('k')).pending + (await b.backlog('k')).retrying === 0, { what: 'the key to drain' });
    // Its extras mark went with its last extra: the key's next pushes and claims are plain again.
    await waitFor(async () => (await redisClient().exists(keyspaceOf(b).forKey('k').extras)) === 0, { what: 'the extras mark to go' });
    await b.performBatchLater(['later'], { key: 'k' });
    await waitFor(() => rec.idsOf('k').includes('later'), { what: 'the plain push to run' });
  });
});

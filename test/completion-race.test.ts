import { describe, expect, it } from 'vitest';
import { range, Recorder, testBatcher, waitFor } from './helpers/redis';

describe('push while the key job completes (no lost wakeup)', () => {
  it('processes every id pushed at any moment, without another push', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, sliceSize: 3 });
    b.createWorker({ concurrency: 4 });
    // Pushes land while the previous job claims, finds the key empty and completes.
    for (const i of range(400)) {
      await b.performBatchLater([i], { key: 'racy' });
      if (Number(i) % 3 === 0) await new Promise((r) => setImmediate(r));
    }
    await waitFor(() => rec.all.length >= 400, { what: '400 ids', timeoutMs: 30_000 });
    expect(rec.idsOf('racy')).toEqual(range(400));
    expect(await b.backlog('racy')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  it('hits the window where the job has found the key empty but not yet completed', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler });
    b.createWorker();
    // Each push waits for the previous id to be processed, then pushes at once: the job is
    // then between its last (empty) claim and its completion, the window of the original design.
    for (let i = 0; i < 300; i++) {
      await b.performBatchLater([String(i)], { key: 'window' });
      await waitFor(() => rec.all.length === i + 1, { intervalMs: 1, what: `id ${i}` });
    }
    expect(rec.all).toEqual(range(300));
  });

  it.each([1, 3])(
    'a stream of single-id pushes to many keys, completions racing them, strands nothing (concurrencyPerKey %i)',
    async (lanes) => {
      const seen = new Map<string, string[]>();
      const running = new Map<string, number>();
      let overlaps = 0;
      const b = testBatcher({
        concurrencyPerKey: lanes,
        async eachIteration(ids, ctx) {
          running.set(ctx.key, (running.get(ctx.key) ?? 0) + 1);
          if (running.get(ctx.key)! > 1) overlaps++;
          await new Promise((r) => setImmediate(r));
          seen.set(ctx.key, [...(seen.get(ctx.key) ?? []), ...ids]);
          running.set(ctx.key, running.get(ctx.key)! - 1);
        },
      });
      b.createWorker({ concurrency: 8 });
      const keys = range(40, 'k-');
      const pushed = new Map<string, string[]>(keys.map((k) => [k, []]));
      // Pushes land in every phase of their key's run: waiting job, first claim, handler, the
      // last (releasing) claim, completion. Many in flight at once, as from a busy controller.
      const inFlight: Promise<unknown>[] = [];
      for (let i = 0; i < 1500; i++) {
        const key = keys[(i * 7919) % keys.length]!;
        pushed.get(key)!.push(String(i));
        inFlight.push(b.performBatchLater([String(i)], { key }));
        if (i % 10 === 0) await new Promise((r) => setImmediate(r));
      }
      await Promise.all(inFlight);
      const total = () => [...seen.values()].reduce((n, ids) => n + ids.length, 0);
      await waitFor(() => total() >= 1500, { what: 'every pushed id', timeoutMs: 30_000 });
      for (const key of keys) {
        const ids = seen.get(key) ?? [];
        // Each key's ids once each (nothing crashed, so nothing runs twice), in push order with one lane.
        expect([...ids].sort()).toEqual([...pushed.get(key)!].sort());
        if (lanes === 1) expect(ids).toEqual(pushed.get(key));
        expect(await b.backlog(key)).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
      }
      if (lanes === 1) expect(overlaps).toBe(0);
    },
  );
});

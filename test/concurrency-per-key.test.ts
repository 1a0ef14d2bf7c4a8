import { describe, expect, it } from 'vitest';
import { range, testBatcher, waitFor } from './helpers/redis';

describe('concurrencyPerKey', () => {
  it.each(['list', 'set'] as const)('%s: runs 4 slices of one key at once, each id exactly once, never one id in two running slices', async (store) => {
    const running = new Set<string>();
    const counts = new Map<string, number>();
    let overlaps = 0;
    let most = 0;
    let slices = 0;
    const b = testBatcher({
      store,
      sliceSize: 5,
      concurrencyPerKey: 4,
      async eachIteration(ids) {
        for (const id of ids) {
          if (running.has(id)) overlaps++;
          running.add(id);
        }
        slices++;
        most = Math.max(most, slices);
        await new Promise((resolve) => setTimeout(resolve, 10));
        slices--;
        for (const id of ids) {
          running.delete(id);
          counts.set(id, (counts.get(id) ?? 0) + 1);
        }
      },
    });
    b.createWorker({ concurrency: 1 });
    await b.performBatchLater(range(200), { key: 'k' });
    await waitFor(() => counts.size === 200, { what: 'every id' });
    expect(most).toBe(4);
    expect(overlaps).toBe(0);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  it('stops every lane when the budget is spent, and the next run goes on where they stopped', async () => {
    const seen: string[] = [];
    const reasons: string[] = [];
    const b = testBatcher({
      sliceSize: 2,
      concurrencyPerKey: 3,
      maxRuntimeMs: 20,
      async eachIteration(ids) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        seen.push(...ids);
      },
    });
    b.on('interrupted', (e) => reasons.push(e.reason));
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(120), { key: 'k', track: true });
    expect(await b.waitFor(ticket!, { timeoutMs: 30_000 })).toMatchObject({ done: 120, pending: 0 });
    expect(reasons.length).toBeGreaterThan(1);
    expect([...seen].sort()).toEqual(range(120).sort());
  });

  it('failed slices in one lane are retried while the other lanes go on', async () => {
    const seen = new Set<string>();
    let failures = 0;
    const b = testBatcher({
      sliceSize: 1,
      concurrencyPerKey: 2,
      backoff: { type: 'fixed', delayMs: 50 },
      async eachIteration(ids) {
        if (ids[0] === '3' && failures++ < 2) throw new Error('flaky');
        seen.add(ids[0]!);
      },
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(20), { key: 'k', track: true });
    expect(await b.waitFor(ticket!)).toMatchObject({ done: 20, failed: 0 });
    expect(seen.size).toBe(20);
    expect(failures).toBe(3);
  });
});

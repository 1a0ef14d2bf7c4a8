import { describe, expect, it } from 'vitest';
import { Gate } from './helpers/gate';
import { range, testBatcher, waitFor } from './helpers/redis';
import { busiestWindow, sleep } from './helpers/time';
import type { Batcher } from '../src';

/**
 * Limits changed while runs are under way (issue 45, items 6, 19, 20, 21): each run follows
 * them at its next slice, and what a period with limits off left behind stalls nobody.
 */

/** Pushes `perKey` ids to each of keys k0…k(keys-1). */
async function pushKeys(b: Batcher, keys: number, perKey: number): Promise<void> {
  await Promise.all(range(keys).map((k) => b.performBatchLater(range(perKey, `${k}-`), { key: `k${k}` })));
}

/**
 * A handler whose first slices wait at a gate (so that every run is inside a slice as the test
 * changes a limit), then take 5 ms each; it counts the most slices running at once among those
 * that began after the gate opened.
 */
function gated(): {
  handler: (ids: readonly string[]) => Promise<void>;
  gate: Gate;
  done: string[];
  running: () => number;
  mostAfter: () => number;
} {
  const gate = new Gate();
  let open = false;
  void gate.opened.then(() => (open = true));
  let running = 0;
  let most = 0;
  const done: string[] = [];
  const handler = async (ids: readonly string[]) => {
    running++;
    if (open) most = Math.max(most, running);
    await (open ? sleep(5) : gate.opened);
    running--;
    done.push(...ids);
  };
  return { handler, gate, done, running: () => running, mostAfter: () => most };
}

describe('limits changed while runs are under way hold at each run’s next slice', () => {
  it('a lowered globalConcurrency: running lanes above the new cap give their places up', async () => {
    const m = gated();
    const b = testBatcher({ sliceSize: 2, globalConcurrency: 8, eachIteration: m.handler });
    b.createWorker({ concurrency: 8 });
    await pushKeys(b, 8, 20);
    await waitFor(() => m.running() === 8, { what: '8 slices at once under a cap of 8' });
    await b.setGlobalConcurrency(2);
    m.gate.open();
    await waitFor(() => m.done.length === 160, { what: 'all 160 ids', timeoutMs: 30_000 });
    expect(m.mostAfter()).toBeLessThanOrEqual(2);
    await waitFor(async () => (await b.stats()).limits.concurrency?.running === 0, { what: 'every place back' });
  });

  it('a cap first set on a batcher that had none', async () => {
    const m = gated();
    const b = testBatcher({ sliceSize: 2, eachIteration: m.handler });
    b.createWorker({ concurrency: 8 });
    await pushKeys(b, 8, 20);
    await waitFor(() => m.running() === 8, { what: '8 slices at once with no cap' });
    await b.setGlobalConcurrency(2);
    m.gate.open();
    await waitFor(() => m.done.length === 160, { what: 'all 160 ids', timeoutMs: 30_000 });
    expect(m.mostAfter()).toBeLessThanOrEqual(2);
  });

  it("ctx.retryAfter(ms, { scope: 'batcher' }) with no limit in force holds this process's other runs at their next slice", async () => {
    const holdMs = 1500;
    let askedAt = 0;
    const starts: { key: string; at: number }[] = [];
    const b = testBatcher({
      sliceSize: 1,
      eachIteration: async (_ids, ctx) => {
        starts.push({ key: ctx.key, at: Date.now() });
        if (ctx.key === 'k0' && askedAt === 0 && starts.length > 20) {
          askedAt = Date.now();
          ctx.retryAfter(holdMs, { scope: 'batcher' });
        }
        await sleep(2);
      },
    });
    b.createWorker({ concurrency: 4 });
    await pushKeys(b, 4, 200);
    await waitFor(() => askedAt > 0, { what: 'the 429' });
    await waitFor(() => starts.filter((s) => s.at >= askedAt + holdMs).length > 0, { what: 'a slice after the hold', timeoutMs: 20_000 });
    // Each other run's lane may have had its claim in flight as the hold was set: one slice each at most.
    const during = starts.filter((s) => s.at > askedAt && s.at < askedAt + holdMs - 50);
    expect(during.length).toBeLessThanOrEqual(3);
  });
});

describe('globalRateLimit counted at handler start', () => {
  it('never lets more than max ids start in any window, on a busy event loop', async () => {
    const starts: [number, number][] = [];
    const options = { sliceSize: 5, globalRateLimit: { max: 50, durationMs: 100 } };
    // Handlers that hold the event loop (parsing, say): a pass's reply waits behind them before
    // its claim is sent, so handlers start well after their reservation.
    const handler = (ids: readonly string[]) => {
      starts.push([Date.now(), ids.length]);
      const until = performance.now() + 8;
      while (performance.now() < until);
    };
    const b = testBatcher({ ...options, eachIteration: handler });
    const name = b.name;
    const other = testBatcher({ ...options, name, eachIteration: handler });
    b.createWorker({ concurrency: 8 });
    other.createWorker({ concurrency: 8 });
    await pushKeys(b, 20, 50);
    await waitFor(() => starts.reduce((n, s) => n + s[1], 0) === 1000, { what: 'all 1000 ids', timeoutMs: 60_000 });
    expect(busiestWindow(starts, 100)).toBeLessThanOrEqual(50);
  });
});

describe('limits turned off and on again', () => {
  it('keys that waited for a place and ran while the cap was off leave no waiter entry behind', async () => {
    const gate = new Gate();
    const ran = new Set<string>();
    const b = testBatcher({
      globalConcurrency: 1,
      eachIteration: async (_ids, ctx) => {
        ran.add(ctx.key);
        if (ctx.key === 'first') await gate.opened;
      },
    });
    b.createWorker({ concurrency: 8 });
    await b.performBatchLater(['1'], { key: 'first' });
    await waitFor(() => ran.has('first'), { what: 'the first key to take the place' });
    await pushKeys(b, 6, 5);
    await waitFor(async () => (await b.stats()).limits.waiting === 6, { what: 'six keys waiting for the place' });
    await b.setGlobalConcurrency(null);
    await waitFor(() => range(6).every((k) => ran.has(`k${k}`)), { what: 'the six, run with the cap off' });
    gate.open();
    // Well within the entries' own lapse (lockTtlMs past their last wait).
    await waitFor(async () => (await b.stats()).limits.waiting === 0, { what: 'no waiter entry left', timeoutMs: 5_000 });
    await b.setGlobalConcurrency(1);
    await b.performBatchLater(range(20), { key: 'new' });
    await waitFor(() => ran.has('new'), { what: 'the new key', timeoutMs: 5_000 });
  });
});

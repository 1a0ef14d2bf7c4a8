import { UnrecoverableError } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { PermanentError, type BatcherEvents, type SliceMiddleware } from '../src';
import { range, Recorder, testBatcher, waitFor } from './helpers/redis';
import { sleep } from './helpers/time';
import { MAX_ERROR_TEXT } from '../src/engine/failures';
import { wellFormedText } from '../src/core/text';

const fast = { attempts: 3, backoff: { type: 'fixed', delayMs: 1 } } as const;
/** How long the successful slices of the events test work. */
const SLICE_MS = 30;

describe('poison isolation', () => {
  it('a slice of 100 with one poison id: 99 processed, 1 dead letter, the key finishes', async () => {
    const rec = new Recorder();
    let poisonRuns = 0;
    const b = testBatcher({
      ...fast,
      eachIteration(ids, ctx) {
        if (ids.includes('42')) {
          poisonRuns++;
          throw new Error('bad record 42');
        }
        rec.handler(ids, ctx);
      },
    });
    b.createWorker();
    await b.performBatchLater([...range(100), ...range(50, 'after-')], { key: 'k' });
    await waitFor(async () => (await b.deadLetters.count()) === 1, { what: 'the dead letter' });
    await waitFor(() => rec.all.length === 149, { what: 'the other ids' });
    expect([...rec.all].sort()).toEqual([...range(100).filter((id) => id !== '42'), ...range(50, 'after-')].sort());
    // 3 attempts of the whole slice, then one run per half on the way down to '42' alone (7 halvings).
    expect(poisonRuns).toBe(3 + 7);
    const { letters } = await b.deadLetters.list();
    expect(letters).toEqual([
      {
        key: 'k',
        id: '42',
        error: { name: 'Error', message: 'bad record 42', stack: expect.stringContaining('bad record 42') },
        attempts: 10,
        firstFailedAt: expect.any(Number),
        lastFailedAt: expect.any(Number),
      },
    ]);
    expect(letters[0]!.lastFailedAt).toBeGreaterThanOrEqual(letters[0]!.firstFailedAt);
    expect(await b.backlog('k')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  it('isolateFailures: false dead-letters the whole slice after its attempts', async () => {
    const rec = new Recorder();
    const b = testBatcher({
      ...fast,
      sliceSize: 10,
      isolateFailures: false,
      eachIteration(ids, ctx) {
        if (ids.includes('3')) throw new Error('no');
        rec.handler(ids, ctx);
      },
    });
    b.createWorker();
    await b.performBatchLater(range(20), { key: 'k' });
    await waitFor(async () => (await b.deadLetters.count({ key: 'k' })) === 10 && rec.all.length === 10);
    expect(rec.all).toEqual(range(20).slice(10));
    expect((await b.deadLetters.list({ limit: 1000 })).letters.map((l) => l.id).sort()).toEqual(range(10).sort());
  });

  it('a PermanentError naming ids sends just those to dead letters at once; the rest run again at once', async () => {
    const rec = new Recorder();
    const runs: string[][] = [];
    const b = testBatcher({
      ...fast,
      sliceSize: 10,
      eachIteration(ids, ctx) {
        runs.push([...ids]);
        const bad = ids.filter((id) => id === '2' || id === '7');
        if (bad.length > 0) throw new PermanentError('unknown records', { ids: bad });
        rec.handler(ids, ctx);
      },
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(range(10), { key: 'k', track: true });
    expect(await b.waitFor(ticket)).toMatchObject({ total: 10, done: 8, failed: 2, pending: 0 });
    expect(runs).toEqual([range(10), range(10).filter((id) => id !== '2' && id !== '7')]);
    const letters = (await b.deadLetters.list()).letters;
    expect(letters.map((l) => [l.id, l.attempts, l.error.name, l.error.message]).sort()).toEqual([
      ['2', 1, 'PermanentError', 'unknown records'],
      ['7', 1, 'PermanentError', 'unknown records'],
    ]);
  });

  it.each([
    ['PermanentError', () => new PermanentError('the whole batch is bad')],
    ["BullMQ's UnrecoverableError", () => new UnrecoverableError('the whole batch is bad')],
  ])('a %s without ids skips the retries and splits the slice at once', async (_label, make) => {
    const runs: string[][] = [];
    const b = testBatcher({
      attempts: 5,
      backoff: { type: 'fixed', delayMs: 60_000 },
      sliceSize: 4,
      eachIteration(ids) {
        runs.push([...ids]);
        if (ids.includes('1')) throw make();
      },
    });
    b.createWorker();
    await b.performBatchLater(range(4), { key: 'k' });
    await waitFor(async () => (await b.deadLetters.count()) === 1);
    expect(runs).toEqual([['0', '1', '2', '3'], ['0', '1'], ['2', '3'], ['0'], ['1']]);
  });
});

describe('a handler that fails at random 20% of the time', () => {
  it('over 10,000 ids in 20 keys: every id ends processed exactly once or dead-lettered; none lost, none stuck', async () => {
    const processed = new Map<string, number>();
    const keys = range(20, 'acct-');
    const b = testBatcher({
      // Two attempts: some slices use them up, so splitting and dead letters are exercised too.
      attempts: 2,
      backoff: { type: 'fixed', delayMs: 5 },
      eachIteration(ids, ctx) {
        if (Math.random() < 0.2) throw new Error('random failure');
        for (const id of ids) processed.set(`${ctx.key}/${id}`, (processed.get(`${ctx.key}/${id}`) ?? 0) + 1);
      },
    });
    b.createWorker({ concurrency: 4 });
    for (const key of keys) await b.performBatchLater(range(500), { key });
    const settled = async () => {
      const dead = await b.deadLetters.count();
      return processed.size + dead === 10_000;
    };
    await waitFor(settled, { timeoutMs: 60_000, what: 'every id processed or dead' });
    const letters: string[] = [];
    for (let cursor: string | undefined = '0'; cursor !== undefined;) {
      const page = await b.deadLetters.list({ limit: 1000, cursor });
      letters.push(...page.letters.map((l) => `${l.key}/${l.id}`));
      cursor = page.cursor;
    }
    const all = keys.flatMap((key) => range(500).map((id) => `${key}/${id}`));
    expect([...processed.values()].every((n) => n === 1)).toBe(true);
    expect(letters.filter((id) => processed.has(id))).toEqual([]);
    expect([...processed.keys(), ...letters].sort()).toEqual(all.sort());
    for (const key of keys) expect(await b.backlog(key)).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });
});

describe('hooks', () => {
  it('around middlewares wrap every slice, outermost first, and see its failure', async () => {
    const trail: string[] = [];
    const mw =
      (name: string): SliceMiddleware =>
      async (slice, next) => {
        trail.push(`${name}>${slice.ids.join(',')}#${slice.attempt}`);
        try {
          await next();
          trail.push(`${name}<ok`);
        } catch (err) {
          trail.push(`${name}<${(err as Error).message}`);
          throw err;
        }
      };
    let failOnce = true;
    const b = testBatcher({
      ...fast,
      sliceSize: 2,
      around: [mw('outer'), mw('inner')],
      eachIteration(ids) {
        trail.push(`handler ${ids.join(',')}`);
        if (failOnce) {
          failOnce = false;
          throw new Error('boom');
        }
      },
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(['a', 'b'], { key: 'k', track: true });
    await b.waitFor(ticket);
    expect(trail).toEqual([
      'outer>a,b#1',
      'inner>a,b#1',
      'handler a,b',
      'inner<boom',
      'outer<boom',
      'outer>a,b#2',
      'inner>a,b#2',
      'handler a,b',
      'inner<ok',
      'outer<ok',
    ]);
  });

  it('an error text ending mid-emoji, with a 1 MB message, is dead-lettered at once, well-formed and capped', async () => {
    const runs: string[][] = [];
    const title = 'Ünïcode 🙂🙂🙂';
    const b = testBatcher({
      attempts: 1,
      eachIteration(ids) {
        runs.push([...ids]);
        if (!ids.includes('bad')) return;
        // title.slice(0, 9) ends with the first half of an emoji; the message is 1 MB.
        const error = new Error(`${'m'.repeat(1_000_000)}`);
        error.name = title.slice(0, 9);
        error.message = title.slice(0, 9) + error.message + '🙂'.slice(0, 1);
        throw error;
      },
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(['ok', 'bad', 'fine'], { key: 'k', track: true });
    await b.waitFor(ticket);
    // Split down to 'bad' (one run of the slice, one per half): never the crash path, which runs it again whole.
    expect(runs.filter((ids) => ids.includes('bad'))).toEqual([['ok', 'bad', 'fine'], ['ok', 'bad'], ['bad']]);
    const [letter] = (await b.deadLetters.list()).letters;
    expect(letter!.error.name).toBe('Ünïcode \uFFFD');
    expect(letter!.error.message).toHaveLength(MAX_ERROR_TEXT.message);
    expect(letter!.error.message.startsWith('Ünïcode \uFFFDmmm')).toBe(true);
    expect(letter!.error.stack!.length).toBeLessThanOrEqual(MAX_ERROR_TEXT.stack);
    const progress = await b.progress(ticket);
    expect(progress).toMatchObject({ total: 3, done: 2, failed: 1 });
    expect(progress.errors[0]!.message).toHaveLength(MAX_ERROR_TEXT.message);
  });

  it('wellFormedText never splits a pair and replaces lone surrogates', () => {
    expect(wellFormedText('ab🙂', 3)).toBe('ab');
    expect(wellFormedText('ab🙂', 4)).toBe('ab🙂');
    expect(wellFormedText('\uDC00x\uD800', 10)).toBe('\uFFFDx\uFFFD');
  });

  it('a middleware that throws fails the slice like the handler would', async () => {
    const b = testBatcher({
      attempts: 1,
      isolateFailures: false,
      around: () => Promise.reject(new Error('middleware refused')),
      eachIteration() {},
    });
    b.createWorker();
    await b.performBatchLater(['x'], { key: 'k' });
    await waitFor(async () => (await b.deadLetters.count()) === 1);
    expect((await b.deadLetters.list()).letters[0]!.error.message).toBe('middleware refused');
  });

  it('emits slice:done, slice:failed (retry, split, dead), dead and interrupted', async () => {
    const startedAt = performance.now();
    const seen: string[] = [];
    const events: Partial<{ [E in keyof BatcherEvents]: BatcherEvents[E][0][] }> = {};
    const b = testBatcher({
      attempts: 2,
      backoff: { type: 'fixed', delayMs: 1 },
      sliceSize: 2,
      maxRuntimeMs: 1,
      async eachIteration(ids) {
        if (ids.includes('bad')) throw new Error('bad id');
        // Work of a known length, for the event's durationMs to be held to.
        await sleep(SLICE_MS);
      },
    });
    const record = <E extends keyof BatcherEvents>(event: E) =>
      b.on(event, (payload) => {
        seen.push(event);
        ((events[event] ??= []) as BatcherEvents[E][0][]).push(payload);
      });
    record('slice:done');
    record('slice:failed');
    record('dead');
    record('interrupted');
    // A listener that throws is logged and skipped: it must not fail the slice.
    b.on('slice:done', () => {
      throw new Error('listener bug');
    });
    b.createWorker();
    const { ticket } = await b.performBatchLater(['ok', 'bad'], { key: 'k', track: true });
    expect(await b.waitFor(ticket)).toMatchObject({ done: 1, failed: 1 });
    await waitFor(() => events.dead?.length === 1);
    expect(events['slice:failed']!.map((e) => [e.ids, e.attempt, e.outcome])).toEqual([
      [['ok', 'bad'], 1, 'retry'],
      [['ok', 'bad'], 2, 'split'],
      [['bad'], 3, 'dead'],
    ]);
    expect(events['slice:failed']![0]!.retryInMs).toBe(1);
    expect(events['slice:done']!.map((e) => e.ids)).toEqual([['ok']]);
    // The slice's own time: at least its work (a timer may fire a ms early), at most the test's so far.
    expect(events['slice:done']![0]!.durationMs).toBeGreaterThanOrEqual(SLICE_MS - 5);
    expect(events['slice:done']![0]!.durationMs).toBeLessThanOrEqual(performance.now() - startedAt);
    expect(events.dead![0]).toMatchObject({ key: 'k', ids: ['bad'], attempts: 3 });
    expect(events.dead![0]!.error.message).toBe('bad id');
    // maxRuntimeMs 1: every slice ends the run between slices.
    expect(events.interrupted!.every((e) => e.reason === 'max_runtime' && e.key === 'k')).toBe(true);
    expect(events.interrupted!.length).toBeGreaterThan(0);

    const before = seen.length;
    const listener = () => seen.push('late');
    b.on('slice:done', listener);
    b.off('slice:done', listener);
    await b.waitFor((await b.performBatchLater(['more'], { key: 'k', track: true })).ticket);
    expect(seen.slice(before)).not.toContain('late');
  });
});

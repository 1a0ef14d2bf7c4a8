import { describe, expect, it } from 'vitest';
import { InvalidKeyError, InvalidOptionError, PermanentError, type Batcher } from '../src';
import type { Keyspace } from '../src/storage/keys';
import { keyspaceOf, range, Recorder, redisClient, testBatcher, waitFor } from './helpers/redis';

/** A batcher whose handler dead-letters every id in `poison` at once (ids starting 'flaky' only after 3 attempts), and records the rest. */
function poisoned(poison: Set<string>, extra: Partial<Parameters<typeof testBatcher>[0]> = {}): { b: Batcher; rec: Recorder } {
  const rec = new Recorder();
  const b = testBatcher({
    sliceSize: 1,
    attempts: 3,
    backoff: { type: 'fixed', delayMs: 1 },
    ...extra,
    eachIteration(ids, ctx) {
      const bad = ids.filter((id) => poison.has(`${ctx.key}/${id}`));
      if (bad.some((id) => id.startsWith('flaky'))) throw new Error('flaky failure');
      if (bad.length > 0) throw new PermanentError(`poison ${bad.join(',')}`, { ids: bad });
      rec.handler(ids, ctx);
    },
  });
  b.createWorker();
  return { b, rec };
}

async function deadAfter(b: Batcher, pushes: [string, string[]][], count: number): Promise<void> {
  for (const [key, ids] of pushes) await b.performBatchLater(ids, { key });
  await waitFor(async () => (await b.deadLetters.count()) === count, { what: `${count} dead letters` });
}

describe('dead letters', () => {
  it('list orders by time (newest first) or attempts, filters by key, and pages with a cursor', async () => {
    const poison = new Set(['a/flaky1', 'a/2', 'b/1']);
    const { b } = poisoned(poison);
    await deadAfter(b, [['a', ['flaky1']]], 1);
    await deadAfter(b, [['b', ['1']]], 2);
    await deadAfter(b, [['a', ['2']]], 3);

    const all = await b.deadLetters.list();
    expect(all.letters.map((l) => `${l.key}/${l.id}`)).toEqual(['a/2', 'b/1', 'a/flaky1']);
    expect(all.cursor).toBeUndefined();

    const first = await b.deadLetters.list({ limit: 2 });
    expect(first.letters.map((l) => `${l.key}/${l.id}`)).toEqual(['a/2', 'b/1']);
    const second = await b.deadLetters.list({ limit: 2, cursor: first.cursor! });
    expect(second.letters.map((l) => `${l.key}/${l.id}`)).toEqual(['a/flaky1']);
    expect(second.cursor).toBeUndefined();

    expect((await b.deadLetters.list({ key: 'a' })).letters.map((l) => l.id)).toEqual(['2', 'flaky1']);
    expect(await b.deadLetters.count({ key: 'a' })).toBe(2);
    expect(await b.deadLetters.count({ key: 'nobody' })).toBe(0);

    const byAttempts = await b.deadLetters.list({ order: 'attempts' });
    expect(byAttempts.letters.map((l) => [`${l.key}/${l.id}`, l.attempts])[0]).toEqual(['a/flaky1', 3]);
    const ofA = await b.deadLetters.list({ key: 'a', order: 'attempts' });
    expect(ofA.letters.map((l) => [l.id, l.attempts])).toEqual([
      ['flaky1', 3],
      ['2', 1],
    ]);
    expect(ofA.letters[0]!.firstFailedAt).toBeLessThan(ofA.letters[0]!.lastFailedAt);
    expect(ofA.letters[1]!.firstFailedAt).toBe(ofA.letters[1]!.lastFailedAt);
  });

  it('requeue pushes the ids back and they are processed; it returns how many', async () => {
    const poison = new Set(['a/1', 'a/2', 'b/1']);
    const { b, rec } = poisoned(poison);
    await deadAfter(
      b,
      [
        ['a', ['1', '2', '3']],
        ['b', ['1', '2']],
      ],
      3,
    );
    poison.clear(); // fixed
    expect(await b.deadLetters.requeue({ key: 'a' })).toBe(2);
    await waitFor(() => rec.idsOf('a').length === 3);
    expect(rec.idsOf('a').sort()).toEqual(['1', '2', '3']);
    expect(await b.deadLetters.count()).toBe(1);
    expect(await b.deadLetters.requeue()).toBe(1);
    await waitFor(() => rec.idsOf('b').length === 2);
    expect(await b.deadLetters.count()).toBe(0);
    expect(await b.deadLetters.requeue()).toBe(0);
  });

  it('purge removes letters by key and ids, or all; it returns how many', async () => {
    const poison = new Set(['a/1', 'a/2', 'b/1', 'b/2']);
    const { b } = poisoned(poison);
    await deadAfter(
      b,
      [
        ['a', ['1', '2']],
        ['b', ['1', '2']],
      ],
      4,
    );
    expect(await b.deadLetters.purge({ key: 'a', ids: ['2', 'missing'] })).toBe(1);
    expect(await b.deadLetters.purge({ ids: ['1'] })).toBe(2); // a/1 and b/1
    expect((await b.deadLetters.list()).letters.map((l) => `${l.key}/${l.id}`)).toEqual(['b/2']);
    expect(await b.deadLetters.purge()).toBe(1);
    expect(await b.deadLetters.count()).toBe(0);
  });

  it('keeps at most maxDeadLetters, evicting the oldest and counting them', async () => {
    const poison = new Set(range(5).map((id) => `k/${id}`));
    const { b } = poisoned(poison, { maxDeadLetters: 3 });
    for (const id of range(5)) await deadAfter(b, [['k', [id]]], Math.min(3, Number(id) + 1));
    await waitFor(async () => (await b.deadLetters.evicted()) === 2);
    expect((await b.deadLetters.list()).letters.map((l) => l.id)).toEqual(['4', '3', '2']);
    expect(await b.deadLetters.count({ key: 'k' })).toBe(3);
  });

  it('works for any key string', async () => {
    const weird = 'acct:{x}%20 ü/\n';
    const poison = new Set([`${weird}/1`]);
    const { b } = poisoned(poison);
    await deadAfter(b, [[weird, ['1']]], 1);
    expect((await b.deadLetters.list({ key: weird })).letters).toMatchObject([{ key: weird, id: '1' }]);
    expect(await b.deadLetters.purge({ key: weird })).toBe(1);
  });

  it('refuses bad queries before touching Redis', async () => {
    // No worker: nothing here runs.
    const b = testBatcher({ eachIteration: () => {} });
    await expect(b.deadLetters.list({ limit: 0 })).rejects.toThrow(/limit must be an integer between 1 and 1000, got number 0/);
    await expect(b.deadLetters.list({ cursor: 'abc' })).rejects.toThrow(InvalidOptionError);
    await expect(b.deadLetters.list({ order: 'size' as never })).rejects.toThrow(
      /deadLetters.list order must be one of 'time', 'attempts'/,
    );
    await expect(b.deadLetters.count({ key: '' })).rejects.toThrow(InvalidKeyError);
    await expect(b.deadLetters.requeue({ ids: [{}] as never })).rejects.toThrow(/ids\[0\] must be a string or a finite number/);
  });
});

describe('dead letters of a holder that lost the lock', () => {
  it('a fenced-out holder neither replaces, removes nor evicts a real letter', async () => {
    const redis = redisClient();
    let names!: ReturnType<Keyspace['forKey']>;
    const b = testBatcher({
      sliceSize: 2,
      maxDeadLetters: 2,
      async eachIteration(ids) {
        // Frozen past its lock: another holder has the key now (and has dead-lettered 'x' itself).
        await redis.set(names.lock, 'the new holder', 'PX', 10_000);
        throw new PermanentError('from the stale holder', { ids });
      },
    });
    names = keyspaceOf(b).forKey('k');
    const dead = keyspaceOf(b).dead;
    const real = (id: string, at: number) =>
      JSON.stringify({ key: 'k', id, error: { name: 'Error', message: 'real' }, attempts: 5, firstFailedAt: at, lastFailedAt: at });
    for (const [id, at] of [
      ['x', 1000],
      ['y', 2000],
    ] as const) {
      await redis.hset(dead.entries, `k:${id}`, real(id, at));
      await redis.zadd(dead.byTime, at, `k:${id}`);
      await redis.zadd(dead.byAttempts, 5, `k:${id}`);
      await redis.zadd(`${dead.ofKey}k`, at, `k:${id}`);
    }
    const lost = new Promise<void>((resolve) => b.on('interrupted', ({ reason }) => reason === 'lock_lost' && resolve()));
    await b.performBatchLater(['x', 'z'], { key: 'k' });
    b.createWorker();
    await lost;
    // The stale letters were taken back: 'x' has its real letter again, 'z' none, and the cap of 2
    // (reached by the stale 'z') evicted nothing.
    expect(await redis.hget(dead.entries, 'k:x')).toBe(real('x', 1000));
    expect(await redis.hget(dead.entries, 'k:y')).toBe(real('y', 2000));
    expect(await redis.hexists(dead.entries, 'k:z')).toBe(0);
    expect(await redis.zrange(dead.byTime, 0, -1)).toEqual(['k:x', 'k:y']);
    expect(await b.deadLetters.evicted()).toBe(0);
    expect(await b.deadLetters.count()).toBe(2);
  });
});

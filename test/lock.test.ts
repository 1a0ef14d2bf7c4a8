import { describe, expect, it } from 'vitest';
import { LockLostError } from '../src';
import { Keyspace } from '../src/keys';
import { keyspaceOf, range, Recorder, redisClient, testBatcher, waitFor } from './helpers/redis';

describe('per-key lock and fencing', () => {
  it('a run that loses its lock sees ctx.signal abort, commits nothing, and the slice is processed again', async () => {
    const rec = new Recorder();
    const reasons: unknown[] = [];
    const redis = redisClient();
    let names!: ReturnType<Keyspace['forKey']>;
    let calls = 0;
    let backlogWhileLost: unknown;
    const b = testBatcher({
      sliceSize: 5,
      lockTtlMs: 1000,
      async eachIteration(ids, ctx) {
        calls++;
        if (calls === 1) {
          // Another holder takes the key (as after an expiry): our renewals and commits must fail.
          await redis.set(names.lock, 'intruder', 'PX', 1500);
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
          reasons.push(ctx.signal.reason);
          backlogWhileLost = await b.backlog('k');
          return;
        }
        rec.handler(ids, ctx);
      },
    });
    names = keyspaceOf(b).forKey('k');
    await b.performBatchLater(range(10), { key: 'k' });
    b.createWorker();
    await waitFor(() => rec.all.length === 10, { what: 'all ids after the intruder left' });
    expect(reasons[0]).toBeInstanceOf(LockLostError);
    expect((reasons[0] as LockLostError).code).toBe('ERR_LOCK_LOST');
    expect(backlogWhileLost).toEqual({ pending: 5, inFlight: 5, retrying: 0 });
    // The aborted slice was not acked by the run that lost the lock: it came back first.
    expect(rec.all).toEqual(range(10));
  });

  it('the claim script refuses a caller that does not hold the lock', async () => {
    const { claim } = await import('../src/store');
    const { defineScripts } = await import('../src/scripts');
    const redis = redisClient();
    defineScripts(redis);
    const names = new Keyspace('bull', 'fencing-unit').forKey('k');
    await redis.rpush(names.pending, 'a', 'b');
    await redis.set(names.lock, 'holder', 'PX', 5000);
    expect(await claim(redis, 'list', names, 'not-holder', 'c1', 'ack', 10)).toEqual({ held: false });
    expect(await redis.llen(names.pending)).toBe(2);
    expect(await claim(redis, 'list', names, 'holder', 'c1', 'restore', 1)).toMatchObject({ held: true, ids: ['a'], waitMs: 0 });
    // A resent claim (same id) changes nothing and answers with what is in flight.
    expect(await claim(redis, 'list', names, 'holder', 'c1', 'ack', 1)).toEqual({ held: true, ids: ['a'], waitMs: 0 });
    expect(await redis.lrange(names.inFlight, 0, -1)).toEqual(['a']);
    // A resent empty claim answers with the same wait, not 'drained' (which would end the run).
    expect(await claim(redis, 'list', names, 'holder', 'c2', 'ack', 10)).toMatchObject({ ids: ['b'] });
    const time = await redis.time();
    await redis.zadd(names.retry, Number(time[0]) * 1000 + 60_000, 'failed-slice');
    const waiting = await claim(redis, 'list', names, 'holder', 'c3', 'ack', 10);
    expect(waiting).toMatchObject({ held: true, ids: [] });
    expect((waiting as { waitMs: number }).waitMs).toBeGreaterThan(50_000);
    expect(await claim(redis, 'list', names, 'holder', 'c3', 'ack', 10)).toEqual(waiting);
    await redis.del(names.pending, names.inFlight, names.lock, names.lastClaim, names.retry);
  });
});

describe('lock acquire script (given to redlock)', () => {
  it('is safe to resend: a lock held with the same value is taken again, another value is refused', async () => {
    const { scriptSource } = await import('../src/scripts');
    const redis = redisClient();
    const lua = scriptSource('acquire-lock');
    const key = `acquire-unit:${Date.now()}`;
    expect(await redis.eval(lua, 1, key, 'mine', 5000)).toBe(1);
    expect(await redis.eval(lua, 1, key, 'mine', 5000)).toBe(1); // the resend after a lost reply
    expect(await redis.eval(lua, 1, key, 'theirs', 5000)).toBe(0);
    expect(await redis.get(key)).toBe('mine');
    expect(await redis.pttl(key)).toBeGreaterThan(4000);
    await redis.del(key);
  });
});

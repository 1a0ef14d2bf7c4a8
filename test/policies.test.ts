import { UnrecoverableError } from 'bullmq';
import { queueLoadKeys } from '../src/bullmq';
import { describe, expect, it } from 'vitest';
import { defineScripts, runScript } from '../src/storage/scripts';
import { PermanentError } from '../src';
import { planFailure, planOutcomes } from '../src/engine/failures';
import { combine, type RunOutcome } from '../src/engine/decisions';
import { preemption } from '../src/engine/scheduling';
import { redisClient, waitFor } from './helpers/redis';
import { sleep } from './helpers/time';

/** The pure policies, without a worker: what a failed slice becomes, how lanes' outcomes combine, when a run yields. */
describe('planFailure', () => {
  const policy = { attempts: 3, backoff: { type: 'fixed', delayMs: 100 } as const, isolateFailures: true };
  const ids = ['a', 'b', 'c', 'd', 'e'];

  it('retries the whole slice after its backoff until it has used its attempts, then splits it in halves', () => {
    const first = planFailure(ids, undefined, new Error('x'), policy, 1000);
    expect(first).toMatchObject({ outcome: 'retry', retryInMs: 100, attempts: 1, firstFailedAt: 1000, dead: [] });
    expect(first.retry).toEqual([{ delayMs: 100, slice: { ids, attempts: 1, isolating: false, firstFailedAt: 1000 } }]);
    const third = planFailure(ids, { ids, attempts: 2, isolating: false, firstFailedAt: 1000 }, new Error('x'), policy, 3000);
    expect(third.outcome).toBe('split');
    expect(third.retry.map((part) => part.slice.ids)).toEqual([
      ['a', 'b', 'c'],
      ['d', 'e'],
    ]);
    expect(third.retry.every((part) => part.delayMs === 0 && part.slice.isolating)).toBe(true);
  });

  it('a part being isolated runs once: a single id that fails then is dead, keeping its history', () => {
    const plan = planFailure(['c'], { ids: ['c'], attempts: 4, isolating: true, firstFailedAt: 1000 }, new Error('x'), policy, 9000);
    expect(plan).toMatchObject({ outcome: 'dead', dead: ['c'], retry: [], attempts: 5, firstFailedAt: 1000, failedAt: 9000 });
  });

  it('PermanentError with ids kills those at once and retries the rest at once with no attempt spent', () => {
    const plan = planFailure(
      ids,
      { ids, attempts: 1, isolating: false, firstFailedAt: 1000 },
      new PermanentError('bad', { ids: ['b', 'z'] }),
      policy,
      2000,
    );
    expect(plan.outcome).toBe('dead');
    expect(plan.dead).toEqual(['b']);
    expect(plan.retry).toEqual([{ delayMs: 0, slice: { ids: ['a', 'c', 'd', 'e'], attempts: 1, isolating: false, firstFailedAt: 1000 } }]);
  });

  it("PermanentError without ids, or BullMQ's UnrecoverableError, skips the retries; isolateFailures false dead-letters the slice", () => {
    expect(planFailure(ids, undefined, new PermanentError('bad'), policy, 0).outcome).toBe('split');
    expect(planFailure(ids, undefined, new UnrecoverableError('bad'), policy, 0).outcome).toBe('split');
    expect(
      planFailure(ids, { ids, attempts: 2, isolating: false, firstFailedAt: 0 }, new Error('x'), { ...policy, isolateFailures: false }, 0),
    ).toMatchObject({ outcome: 'dead', dead: ids });
  });
});

describe('planOutcomes (ids a handler failed with ctx.fail)', () => {
  const policy = { attempts: 3, backoff: { type: 'fixed', delayMs: 100 } as const, isolateFailures: true };
  const ids = ['a', 'b', 'c', 'd', 'e'];

  it('retries only the failed ids, together, after their backoff; the others are acked', () => {
    const failures = new Map<string, unknown>([
      ['d', new Error('d')],
      ['b', new Error('b')],
    ]);
    const plan = planOutcomes(ids, failures, undefined, policy, 1000);
    expect(plan).toMatchObject({ outcome: 'retry', retryInMs: 100, attempts: 1, dead: [], acked: 3 });
    expect(plan.retry).toEqual([{ delayMs: 100, slice: { ids: ['b', 'd'], attempts: 1, isolating: false, firstFailedAt: 1000 } }]);
  });

  it('once they have used their attempts (or are a part being isolated) they die, never split; a PermanentError dies at once', () => {
    const failures = new Map<string, unknown>([
      ['a', new Error('a')],
      ['c', new Error('c')],
    ]);
    const used = planOutcomes(['a', 'c'], failures, { ids: ['a', 'c'], attempts: 2, isolating: false, firstFailedAt: 10 }, policy, 3000);
    expect(used).toMatchObject({ outcome: 'dead', retry: [], dead: ['a', 'c'], attempts: 3, firstFailedAt: 10, acked: 0 });
    const isolating = planOutcomes(ids, failures, { ids, attempts: 3, isolating: true, firstFailedAt: 10 }, policy, 3000);
    expect(isolating).toMatchObject({ outcome: 'dead', retry: [], dead: ['a', 'c'], acked: 3 });
    const permanent = planOutcomes(ids, new Map([...failures, ['e', new PermanentError('gone')]]), undefined, policy, 0);
    expect(permanent).toMatchObject({ outcome: 'dead', dead: ['e'], acked: 2 });
    expect(permanent.retry.map((part) => part.slice.ids)).toEqual([['a', 'c']]);
  });

  it("a list's id pushed twice into the slice fails, and runs again, twice; it dies once", () => {
    const twice = ['a', 'b', 'a'];
    const failures = new Map([['a', new Error('a')]]);
    expect(planOutcomes(twice, failures, undefined, policy, 0).retry[0]!.slice.ids).toEqual(['a', 'a']);
    expect(planOutcomes(twice, failures, { ids: twice, attempts: 2, isolating: false, firstFailedAt: 0 }, policy, 0)).toMatchObject({
      dead: ['a'],
      acked: 1,
    });
  });
});

describe('combine (a run with lanes)', () => {
  const drained: RunOutcome = { kind: 'drained', released: false };
  const waiting = (waitMs: number): RunOutcome => ({ kind: 'waiting', waitMs, released: false });

  it('a lost lock over a stop, a stop over a wait, the shortest wait over drained', () => {
    expect(combine([drained, waiting(500), waiting(200)])).toEqual(waiting(200));
    expect(combine([waiting(10), { kind: 'stopped', reason: 'max_runtime' }])).toEqual({ kind: 'stopped', reason: 'max_runtime' });
    expect(combine([{ kind: 'stopped', reason: 'shutdown' }, { kind: 'lock_lost' }])).toEqual({ kind: 'lock_lost' });
    expect(combine([drained, drained])).toEqual(drained);
  });

  it("lane 0's stop is the one that says whether to restore (it gives its slice back through the release)", () => {
    const lane0: RunOutcome = { kind: 'stopped', reason: 'shutdown', restore: true };
    expect(combine([lane0, { kind: 'stopped', reason: 'shutdown', restore: false }])).toBe(lane0);
  });

  it('one lane: its own outcome, with whether its last claim released the lock', () => {
    const released: RunOutcome = { kind: 'drained', released: true };
    expect(combine([released])).toBe(released);
  });
});

describe('preemption', () => {
  // One hash tag: BullMQ's keys share a slot, and queue-load.lua reads them in one call.
  const lists = {
    wait: '{preemption-test}:wait',
    active: '{preemption-test}:active',
    delayed: '{preemption-test}:delayed',
    prioritized: '{preemption-test}:prioritized',
    jobPrefix: '{preemption-test}:',
  };
  const logger = {};

  it('a level-0 run never yields before its quantum nor after a short slice; a level-2 run yields to jobs seen waiting twice', async () => {
    const redis = redisClient();
    defineScripts(redis);
    await redis.del(lists.wait, lists.active);
    await redis.rpush(lists.wait, 'j1', 'j2');
    await redis.rpush(lists.active, 'run');
    const always = () => 0;
    const demoted = preemption(redis, () => [lists], logger, { level: 2, light: 0, startedAt: Date.now() }, always);
    // The counts are read in the background, at most every 5 ms: poll until two reads saw the jobs.
    const full = { full: true };
    await waitFor(() => demoted(full) === 'preempted', { intervalMs: 10, what: 'the level-2 run to yield' });
    expect(demoted({ full: false })).toBeUndefined();
    // A level-0 run inside its 50 ms quantum keeps going whatever waits.
    const fresh = preemption(redis, () => [lists], logger, { level: 0, light: 0, startedAt: Date.now() }, always);
    expect(fresh(full)).toBeUndefined();
    await redis.del(lists.wait, lists.active);
  });

  it('counts a due delayed job at priority 0 as waiting (BullMQ promotes it only at a fetch), not one at priority 2', async () => {
    const redis = redisClient();
    defineScripts(redis);
    await redis.del(lists.wait, lists.active, lists.delayed);
    await redis.rpush(lists.active, 'run');
    const due = Date.now() * 0x1000;
    await redis.zadd(lists.delayed, due, 'had-its-turn', due + 1, 'back-from-a-wait', (Date.now() + 60_000) * 0x1000, 'not-due');
    await redis.hset(`${lists.jobPrefix}had-its-turn`, 'priority', 2);
    await redis.hset(`${lists.jobPrefix}back-from-a-wait`, 'priority', 0);
    await redis.hset(`${lists.jobPrefix}not-due`, 'priority', 0);
    const running = preemption(
      redis,
      () => [lists],
      logger,
      { level: 2, light: 0, startedAt: Date.now() },
      () => 0,
    );
    await waitFor(() => running({ full: true }) === 'preempted', {
      intervalMs: 10,
      what: 'the run to yield to the key back from its wait',
    });
    const load = () => runScript(redis, 'queue-load', queueLoadKeys(lists), [Date.now(), 20, 0]);
    expect(await load()).toEqual([1, 1, 0]);
    await redis.zrem(lists.delayed, 'back-from-a-wait');
    expect(await load()).toEqual([0, 1, 0]);
    await redis.del(
      lists.wait,
      lists.active,
      lists.delayed,
      `${lists.jobPrefix}had-its-turn`,
      `${lists.jobPrefix}back-from-a-wait`,
      `${lists.jobPrefix}not-due`,
    );
  });

  it("with priority(key): a normal run yields to light keys at priority 1 as well as to the wait list; a high key's run only to the wait list", async () => {
    const redis = redisClient();
    defineScripts(redis);
    await redis.del(lists.wait, lists.active, lists.delayed, lists.prioritized);
    await redis.rpush(lists.active, 'run');
    // BullMQ scores a prioritized job by its priority * 2^32 plus a counter: two light newcomers, one job that had its turn.
    await redis.zadd(lists.prioritized, 0x100000000 + 1, 'light-1', 0x100000000 + 2, 'light-2', 3 * 0x100000000 + 3, 'had-its-turn');
    const load = () => runScript(redis, 'queue-load', queueLoadKeys(lists), [Date.now(), 20, 1]);
    expect(await load()).toEqual([0, 1, 2]);
    const always = () => 0;
    const full = { full: true };
    const normal = preemption(redis, () => [lists], logger, { level: 3, light: 1, startedAt: Date.now() }, always);
    await waitFor(() => normal(full) === 'preempted', { intervalMs: 10, what: 'the run that had its turn to yield to light keys' });
    // Past its quantum, a high key's run (in the wait list) does not yield to light keys: they start after it anyway.
    const high = preemption(redis, () => [lists], logger, { level: 0, light: 1, startedAt: Date.now() - 1_000 }, always);
    // An absence has no event to wait for: a window of several reads (one every 5 ms at most).
    for (let i = 0; i < 10; i++) {
      expect(high(full)).toBeUndefined();
      await sleep(10);
    }
    await redis.rpush(lists.wait, 'another-high-key');
    await waitFor(() => high(full) === 'preempted', { intervalMs: 10, what: "the high key's run to yield to another high key" });
    await redis.del(lists.wait, lists.active, lists.prioritized);
  });
});

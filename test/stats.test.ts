import { describe, expect, it } from 'vitest';
import { batchByKey, InvalidOptionError, PermanentError, type Batcher, type StoreKind } from '../src';
import { redisNow } from '../src/ops/stats';
import { Gate } from './helpers/gate';
import { keyspaceOf, onCluster, redisClient, testBatcher, testConnection, track, waitFor } from './helpers/redis';

/** Pushes and returns the Redis clock just before and just after, which bracket the push's mark. */
async function timedPush(b: Batcher, key: string, ids: string[]): Promise<[number, number]> {
  const client = redisClient();
  const before = await redisNow(client);
  await b.performBatchLater(ids, { key });
  return [before, await redisNow(client)];
}

/** A lag read at `at` of ids pushed within [before, after] is within these bounds. */
function expectLagOf(lag: number, at: number, [before, after]: [number, number]): void {
  expect(lag).toBeGreaterThanOrEqual(at - after);
  expect(lag).toBeLessThanOrEqual(at - before);
}

describe('stats()', () => {
  it('counts pending, in flight (a blocked slice), backing off and dead exactly, with the busiest and laggiest keys', async () => {
    const gate = new Gate();
    const b = testBatcher({
      sliceSize: 2,
      attempts: 1,
      isolateFailures: false,
      async eachIteration(ids, ctx) {
        if (ctx.key === 'bad') throw new PermanentError('bad id');
        if (ctx.key === 'busy') await gate.opened;
      },
    });
    const quiet = await timedPush(b, 'quiet', ['q1']);
    await timedPush(b, 'big', ['1', '2', '3', '4']);
    const busy = await timedPush(b, 'busy', ['1', '2', '3', '4', '5']);
    await b.performBatchLater(['x'], { key: 'bad' });
    const worker = b.createWorker({ concurrency: 4 });
    await waitFor(async () => (await b.backlog('busy')).inFlight === 2 && (await b.deadLetters.count()) === 1, {
      what: 'busy in flight, bad dead',
    });
    await waitFor(async () => (await b.backlog('quiet')).pending === 0 && (await b.backlog('big')).pending === 0, {
      what: 'quiet and big drained',
    });
    await b.performBatchLater(['6'], { key: 'busy' });

    const s = await b.stats();
    expect(s).toMatchObject({
      name: b.name,
      keys: 1,
      pending: 4,
      inFlight: 2,
      retrying: 0,
      dead: 1,
      truncated: false,
      paused: [],
    });
    expect(s.topKeys).toEqual([{ key: 'busy', pending: 4, inFlight: 2, retrying: 0, oldestPendingAgeMs: s.oldestPendingAgeMs }]);
    expect(s.laggingKeys.map((k) => k.key)).toEqual(['busy']);
    // The head of busy's list is id 3, from the first push: the claim consumed two ids of its mark.
    expectLagOf(s.oldestPendingAgeMs, s.at, busy);
    expect(quiet[0]).toBeLessThanOrEqual(busy[0]);

    gate.open();
    await waitFor(async () => (await b.stats()).keys === 0, { what: 'all drained' });
    expect(await b.stats()).toMatchObject({ pending: 0, inFlight: 0, oldestPendingAgeMs: 0, dead: 1, topKeys: [], laggingKeys: [] });
    await worker.close();
  });

  it('lists paused keys, timed ones with their end', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const before = Date.now();
    await b.pause('forever');
    await b.pause('a while', { untilMs: before + 60_000 });
    const { paused } = await b.stats();
    // The end is Redis's: the time asked, turned into a duration by this clock, then into an end by Redis's.
    expect(paused).toEqual([{ key: 'a while', untilMs: expect.any(Number) }, { key: 'forever' }]);
    expect(Math.abs(paused[0]!.untilMs! - (before + 60_000))).toBeLessThan(1_000);
  });

  it('list: lag follows the FIFO head across pushes and claims, and survives a restore', async () => {
    const b = testBatcher({
      sliceSize: 3,
      async eachIteration(_ids, ctx) {
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
        throw ctx.signal.reason;
      },
    });
    const first = await timedPush(b, 'k', ['1', '2']);
    // Pushes 25 ms apart, so reading the wrong mark would show.
    await waitFor(async () => (await redisNow(redisClient())) > first[1] + 25, { what: 'the Redis clock to move on' });
    const second = await timedPush(b, 'k', ['3', '4', '5']);
    let s = await b.stats();
    expectLagOf(s.oldestPendingAgeMs, s.at, first);

    const worker = b.createWorker();
    await waitFor(async () => (await b.backlog('k')).inFlight === 3, { what: 'a slice of 3 in flight' });
    s = await b.stats();
    // Ids 1-3 are in flight; 4 and 5 came with the second push, before any claim: a push to a
    // pending list writes no mark, so they read as old as the push that found it empty (the
    // coarseness allowed: the pushes of one claim interval share its mark).
    expect(s).toMatchObject({ pending: 2, inFlight: 3 });
    expectLagOf(s.oldestPendingAgeMs, s.at, [first[0], second[1]]);

    await worker.close(); // the slice gives up on the shutdown signal and goes back to the head
    s = await b.stats();
    expect(s).toMatchObject({ pending: 5, inFlight: 0 });
    expectLagOf(s.oldestPendingAgeMs, s.at, first);
  });

  it('list, an idle key: lag is exact, from the push that found pending empty; later pushes write no mark', async () => {
    const b = testBatcher({ sliceSize: 10, eachIteration: () => {} });
    const names = keyspaceOf(b).forKey('k');
    const client = redisClient();
    const first = await timedPush(b, 'k', ['1']);
    await waitFor(async () => (await redisNow(client)) > first[1] + 25, { what: 'the Redis clock to move on' });
    for (const id of ['2', '3', '4']) await b.performBatchLater([id], { key: 'k' });
    // One mark for the key, not one per push.
    expect(await client.llen(names.pushMarks)).toBe(1);
    let s = await b.stats();
    expectLagOf(s.oldestPendingAgeMs, s.at, first);

    const worker = b.createWorker();
    await waitFor(async () => (await b.stats()).keys === 0, { what: 'drained' });
    await worker.close();
    await waitFor(async () => (await redisNow(client)) > first[1] + 50, { what: 'the Redis clock to move on' });
    // Drained: the next push dates its ids, exactly.
    const again = await timedPush(b, 'k', ['5']);
    s = await b.stats();
    expectLagOf(s.oldestPendingAgeMs, s.at, again);
  });

  it('list: ids pushed after a slice went back to an empty pending count from the restore, not from the slice', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const holding = (sliceSize: number) =>
      testBatcher({
        name: b.name,
        sliceSize,
        async eachIteration(_ids, ctx) {
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
          throw ctx.signal.reason;
        },
      });
    const client = redisClient();
    const first = await timedPush(b, 'k', ['1']);
    const c = holding(10);
    const worker = c.createWorker();
    await waitFor(async () => (await b.backlog('k')).inFlight === 1, { what: 'the slice in flight' });
    await waitFor(async () => (await redisNow(client)) > first[1] + 25, { what: 'the Redis clock to move on' });
    const restoredFrom = await redisNow(client);
    await worker.close(); // the slice goes back to pending, which was empty
    const second = await timedPush(b, 'k', ['2']);
    // A run of slices of one: it takes id 1 back, leaving id 2 (pushed after the restore) at the head.
    holding(1).createWorker();
    await waitFor(async () => (await b.backlog('k')).inFlight === 1, { what: 'id 1 in flight again' });
    const s = await b.stats();
    const mark = s.at - s.oldestPendingAgeMs;
    expect(mark).toBeGreaterThanOrEqual(restoredFrom);
    expect(mark).toBeLessThanOrEqual(second[1]);
  });

  it('list, a busy key flooded with fresh pushes: lag never reads younger than its oldest id, nor older than the claim before its push', async () => {
    const gates: Gate[] = [];
    let flooding = true;
    const b = testBatcher({
      sliceSize: 2,
      async eachIteration() {
        if (!flooding) return;
        const gate = new Gate();
        gates.push(gate);
        await gate.opened;
      },
    });
    const names = keyspaceOf(b).forKey('k');
    const client = redisClient();
    // Each id's push, bracketed by the Redis clock; the earliest a claim after which it was pushed can have run.
    const pushed = new Map<string, { at: [number, number]; since: number }>();
    const push = async (ids: string[], since?: number) => {
      const at = await timedPush(b, 'k', ids);
      for (const id of ids) pushed.set(id, { at, since: since ?? at[0] });
    };
    const clockMovesOn = async () => {
      const from = await redisNow(client);
      await waitFor(async () => (await redisNow(client)) > from + 20, { what: 'the Redis clock to move on' });
    };
    // A backlog of three slices, so the head is always pushed before the last claim.
    await push(['a1', 'a2', 'a3', 'a4', 'a5', 'a6']);
    await clockMovesOn();
    let claimedFrom = await redisNow(client);
    b.createWorker();
    for (let round = 0; round < 6; round++) {
      await waitFor(() => gates.length === round + 1, { what: `slice ${round} in flight` });
      await push([`r${round}-1`, `r${round}-2`], claimedFrom);
      await clockMovesOn();
      const s = await b.stats();
      const head = (await client.lindex(names.pending, 0))!;
      const mark = s.at - s.oldestPendingAgeMs;
      expect(mark, `round ${round}, head ${head}`).toBeLessThanOrEqual(pushed.get(head)!.at[1]);
      expect(mark, `round ${round}, head ${head}`).toBeGreaterThanOrEqual(pushed.get(head)!.since);
      claimedFrom = await redisNow(client);
      gates[round]!.open();
    }
    // The last rounds' heads came from fresh pushes, dated by claims long after the first push.
    expect((await client.lindex(names.pending, 0))!.startsWith('r')).toBe(true);
    flooding = false;
    for (const gate of gates) gate.open();
  });

  it('zset: lag is exact from the earliest ready time, 0 while nothing is ready yet', async () => {
    const b = testBatcher({ store: 'zset', eachIteration: () => {} });
    const pushed = await timedPush(b, 'now', ['a']);
    await b.performBatchLater(['b'], { key: 'later', delayMs: 60_000 });
    const s = await b.stats();
    expect(s).toMatchObject({ keys: 2, pending: 2 });
    expect(s.laggingKeys.map((k) => [k.key, k.oldestPendingAgeMs > 0 || k.key === 'now'])).toEqual([
      ['now', true],
      ['later', false],
    ]);
    expectLagOf(s.laggingKeys[0]!.oldestPendingAgeMs, s.at, pushed);
    expect(s.laggingKeys[1]!.oldestPendingAgeMs).toBe(0);
  });

  it('set: lag is an upper bound, from when pending last went from empty to non-empty', async () => {
    const gate = new Gate();
    const b = testBatcher({ store: 'set', sliceSize: 1, eachIteration: () => gate.opened });
    const first = await timedPush(b, 'k', ['1', '2']);
    await timedPush(b, 'k', ['3']);
    let s = await b.stats();
    expectLagOf(s.oldestPendingAgeMs, s.at, first); // not the second push's time: pending never emptied
    b.createWorker();
    await waitFor(async () => (await b.backlog('k')).inFlight === 1, { what: 'one in flight' });
    s = await b.stats();
    expect(s).toMatchObject({ pending: 2, inFlight: 1 });
    expectLagOf(s.oldestPendingAgeMs, s.at, first);
    gate.open();
    await waitFor(async () => (await b.stats()).keys === 0, { what: 'drained' });
    // Drained: the mark went with the last id, so the next push starts a fresh one.
    await b.close();
    const c = testBatcher({ name: b.name, store: 'set', eachIteration: () => {} });
    const again = await timedPush(c, 'k', ['9']);
    s = await c.stats();
    expectLagOf(s.oldestPendingAgeMs, s.at, again);
  });

  it('leaves no mark behind once a key is drained', async () => {
    for (const store of ['list', 'set'] as StoreKind[]) {
      const b = testBatcher({ store, sliceSize: 2, eachIteration: () => {} });
      const names = keyspaceOf(b).forKey('k');
      const client = redisClient();
      const { ticket } = await b.performBatchLater(['1', '2', '3'], { key: 'k', track: true });
      // The push left its mark (else this test would pass with marks never written).
      expect(await client.exists(names.pushMarks), store).toBe(1);
      b.createWorker();
      // Settled means the last ack has run: it drops the in-flight mark, and the claims before it took the push marks.
      expect(await b.waitFor(ticket)).toMatchObject({ done: 3 });
      expect(await client.exists(names.pushMarks, names.inFlightMark, names.inFlight), store).toBe(0);
      expect((await b.stats()).keys, store).toBe(0);
    }
  });

  it('list: a key drained after an earlier version added a per-push mark behind the open one keeps no old mark for its next push', async () => {
    const b = testBatcher({ sliceSize: 10, eachIteration: () => {} });
    const names = keyspaceOf(b).forKey('k');
    const client = redisClient();
    await b.performBatchLater(['1'], { key: 'k' });
    // A push of an earlier version (a rolling deploy): its id, and a mark of its own behind the open entry `now 0`.
    const old = (await redisNow(client)) - 60_000;
    await client.rpush(names.pending, '2');
    await client.rpush(names.pushMarks, `${old} 1`);
    const worker = b.createWorker();
    await waitFor(async () => (await b.backlog('k')).pending + (await b.backlog('k')).inFlight === 0, { what: 'k drained' });
    await worker.close();
    // Before the fix the old entry stayed: this push's id read about 60 s of lag.
    const pushed = await timedPush(b, 'k', ['3']);
    const s = await b.stats();
    expectLagOf(s.oldestPendingAgeMs, s.at, pushed);
    expect(await client.lrange(names.pushMarks, 0, -1)).toHaveLength(1);
  });

  it('bounds the keys read by maxKeys and says so; top limits the lists', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    for (let i = 0; i < 5; i++)
      await b.performBatchLater(
        Array.from({ length: i + 1 }, (_, j) => String(j)),
        { key: `k${i}` },
      );
    const all = await b.stats({ top: 2 });
    expect(all).toMatchObject({ keys: 5, pending: 15, truncated: false, scannedKeys: 5 });
    expect(all.topKeys.map((k) => [k.key, k.pending])).toEqual([
      ['k4', 5],
      ['k3', 4],
    ]);
    expect(all.laggingKeys).toHaveLength(2);
    // Each key's job was added by its push (no index entry): the jobs are read oldest first.
    expect(await b.stats({ maxKeys: 3 })).toMatchObject({ keys: 3, pending: 6, truncated: true, scannedKeys: 3 });
  });

  it('counts a key once when it has a job under two shard counts (a change of shards under way)', async () => {
    const one = testBatcher({ shards: 1, eachIteration: () => {} });
    const two = track(batchByKey({ name: one.name, connection: testConnection(), shards: 2 }));
    for (let i = 0; i < 30; i++) await one.performBatchLater(['a'], { key: `k${i}` });
    // Each key's push under the other count adds it a job on that count's queues too.
    for (let i = 0; i < 30; i++) await two.performBatchLater(['b'], { key: `k${i}` });
    // Before the fix: 60 keys, 120 pending (the job keys of both counts, read in one page, were not told apart).
    for (const b of [one, two]) {
      const s = await b.stats({ top: 100 });
      expect(s).toMatchObject({ keys: 30, pending: 60 });
      // Index entries read count as read (types.ts `scannedKeys`): a Cluster push lists its key in
      // its count's index, so each key is listed under both counts there.
      expect(s.scannedKeys).toBe(onCluster() ? 60 : 30);
      expect(new Set(s.topKeys.map((k) => k.key)).size).toBe(30);
    }
  });

  it('rejects bad options with an InvalidOptionError', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await expect(b.stats({ maxKeys: 0 })).rejects.toThrow(InvalidOptionError);
    await expect(b.stats({ top: 1.5 })).rejects.toThrow(/top must be an integer between 1 and 1000/);
    await expect(b.stats(null as never)).rejects.toThrow(InvalidOptionError);
  });
});

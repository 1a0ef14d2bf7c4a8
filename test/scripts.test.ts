import { describe, expect, it } from 'vitest';
import { laneNames } from '../src/storage/keys';
import { failSlice } from '../src/storage/protocol';
import { defineScripts } from '../src/storage/scripts';
import { keyspaceOf, redisClient, testBatcher } from './helpers/redis';

describe('fail-slice.lua', () => {
  it('is idempotent: a resent call (after a reconnect) does not bring back a part claimed since', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const names = keyspaceOf(b).forKey('k');
    const redis = redisClient();
    defineScripts(redis);
    await redis.set(names.lock, 'lock-1', 'PX', 60_000);
    await redis.rpush(names.inFlight, 'a', 'b');
    const plan = { retry: [{ id: 'part-0', delayMs: 0, slice: JSON.stringify({ ids: ['a', 'b'] }) }], dead: { ids: [], message: '' } };
    const resend = () => failSlice(redis, names, 0, 'lock-1', plan, 100, 'slice-1:failed');
    expect(await resend()).toEqual([]);
    expect(await redis.zrange(names.retry, 0, -1)).toEqual(['part-0']);
    // Another lane claims the part, then the first call is resent.
    await redis.zrem(names.retry, 'part-0');
    expect(await resend()).toEqual([]);
    expect(await redis.zrange(names.retry, 0, -1)).toEqual([]);
    // Without the lock, nothing changes.
    await redis.set(names.lock, 'someone-else');
    await redis.rpush(names.inFlight, 'c');
    expect(
      await failSlice(redis, names, 0, 'lock-1', { retry: [], dead: { ids: [], message: '' } }, 100, 'slice-2:failed'),
    ).toBeUndefined();
    expect(await redis.lrange(names.inFlight, 0, -1)).toEqual(['c']);
  });

  it("settles the slice of the lane it is given, and no other lane's", async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const names = keyspaceOf(b).forKey('k');
    const lane2 = laneNames(names, 2);
    const redis = redisClient();
    defineScripts(redis);
    await redis.set(names.lock, 'lock-1', 'PX', 60_000);
    await redis.rpush(names.inFlight, 'lane-0-id');
    await redis.rpush(lane2.inFlight, 'lane-2-id');
    const plan = { retry: [{ id: 'part-0', delayMs: 0, slice: JSON.stringify({ ids: ['lane-2-id'] }) }], dead: { ids: [], message: '' } };
    expect(await failSlice(redis, names, 2, 'lock-1', plan, 100, 'slice-1:failed')).toEqual([]);
    expect(await redis.exists(lane2.inFlight)).toBe(0);
    expect(await redis.get(lane2.lastClaim)).toBe('slice-1:failed');
    expect(await redis.lrange(names.inFlight, 0, -1)).toEqual(['lane-0-id']);
    expect(await redis.exists(names.lastClaim)).toBe(0);
  });
});

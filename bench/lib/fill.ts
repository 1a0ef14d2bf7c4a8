import { randomBytes } from 'node:crypto';
import type { Producer, Target } from '../systems/types';
import { withTimeout } from './clock';
import { pushAll, type Call } from './push';
import { withFreshRedis, type BenchRedis } from './redis';

/** A fresh namespace on the Redis under test, so a system never meets another run's keys. */
export const newTarget = (redis: BenchRedis): Target => ({ url: redis.url, namespace: `bench-${randomBytes(3).toString('hex')}` });

export interface Fill {
  ms: number;
  ids: number;
  /** Redis used_memory the push added, per id. */
  bytesPerId: number;
}

/** Pushes every call through `callers` callers within `timeoutMs`, and measures the time and memory it took. */
export async function measuredFill(
  redis: BenchRedis,
  producer: Producer,
  calls: Iterable<Call>,
  callers: number,
  timeoutMs: number,
  what: string,
): Promise<Fill> {
  const before = await redis.usedMemory();
  const { ms, ids } = await withTimeout(pushAll(producer, calls, callers), timeoutMs, `${what}: push`);
  return { ms, ids, bytesPerId: ((await redis.usedMemory()) - before) / Math.max(1, ids) };
}

/** A producer on an empty Redis pushes every call, then closes: what enqueue and memory measure. */
export async function fillFreshRedis(
  producerFor: (redis: BenchRedis) => Promise<Producer> | Producer,
  calls: Iterable<Call>,
  callers: number,
  timeoutMs: number,
  what: string,
): Promise<Fill> {
  return withFreshRedis(async (redis) => {
    const producer = await producerFor(redis);
    try {
      return await measuredFill(redis, producer, calls, callers, timeoutMs, what);
    } finally {
      await producer.close();
    }
  });
}

import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  batchByKey,
  ClosedError,
  InvalidOptionError,
  PushOutcomeUnknownError,
  PushTimeoutError,
  WrongTypeError,
  type Batcher,
} from '../src';
import { startRedis } from '../tools/redis-server';
import { keyspaceOf, onCluster, queueOf, range, redisClient, testBatcher, track, uniqueName } from './helpers/redis';

/**
 * What a push's promise says of its ids (issue 45, items 11, 13-16, 18 and 30): never "not
 * stored" for ids Redis stored, typed errors for what Redis refused, and push order per key.
 */
const standaloneOnly = it.skipIf(onCluster());

/** Holds the event loop for `ms`: as a burst of pushes or a long handler would, while Redis answers. */
function busy(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // A busy event loop: nothing to do but wait.
  }
}

describe('push outcomes', () => {
  it('refuses pushLingerMs at or above pushTimeoutMs before anything touches Redis (item 18)', () => {
    for (const pushLingerMs of [1_000, 2_000]) {
      expect(() => batchByKey({ name: uniqueName(), connection: 'redis://127.0.0.1:1', pushTimeoutMs: 1_000, pushLingerMs })).toThrow(
        InvalidOptionError,
      );
    }
    expect(() =>
      batchByKey({ name: uniqueName(), connection: 'redis://127.0.0.1:1', pushTimeoutMs: 1_000, pushLingerMs: 999 }),
    ).not.toThrow();
  });
});

import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { inject } from 'vitest';
import { batchByKey, type Batcher, type BatchByKeyOptions, type EachIteration, type KeyJobData } from '../../src';

export const redisUrl = (): string => inject('redisUrl');

/** A fresh queue name per test, so tests never see each other's keys or jobs. */
export const uniqueName = (label = 't'): string => `${label}-${randomBytes(5).toString('hex')}`;

type Closable = { close(): Promise<unknown> } | { quit(): Promise<unknown> };
const tracked: Closable[] = [];

export function track<T extends Closable>(resource: T): T {
  tracked.push(resource);
  return resource;
}

/** Closes in reverse order of creation (workers before their batcher); fails if a close hangs. */
export async function closeTracked(timeoutMs = 15_000): Promise<void> {
  const all = tracked.splice(0).reverse();
  for (const resource of all) {
    const closing = 'close' in resource ? resource.close() : resource.quit();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`close() did not return within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([closing, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}

export function redisClient(): Redis {
  return track(new Redis(redisUrl(), { maxRetriesPerRequest: null }));
}

export type TestOptions = Omit<BatchByKeyOptions, 'name' | 'connection' | 'eachIteration'> & {
  name?: string;
  eachIteration: EachIteration;
};

/** A batcher on the test Redis with a unique name; closed after the test. */
export function testBatcher(options: TestOptions): Batcher {
  return track(batchByKey({ name: uniqueName(), connection: { ...parseUrl(redisUrl()), maxRetriesPerRequest: null }, ...options }));
}

export function parseUrl(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
}

/** Polls until `check` returns a truthy value (which it returns), or throws after `timeoutMs`. */
export async function waitFor<T>(check: () => T | Promise<T>, { timeoutMs = 20_000, intervalMs = 20, what = 'condition' } = {}): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export const range = (n: number, prefix = ''): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

/** Records what a handler saw, in order, with the key and the time. */
export class Recorder {
  readonly calls: { key: string; ids: string[]; at: number }[] = [];
  readonly handler: EachIteration = (ids, ctx) => {
    this.calls.push({ key: ctx.key, ids: [...ids], at: Date.now() });
  };
  idsOf(key: string): string[] {
    return this.calls.filter((c) => c.key === key).flatMap((c) => c.ids);
  }
  get all(): string[] {
    return this.calls.flatMap((c) => c.ids);
  }
}

/** A BullMQ Queue on the batcher's queue, to look at its jobs; closed after the test. */
export function queueOf(batcher: Batcher): Queue<KeyJobData, void, string> {
  return track(new Queue<KeyJobData, void, string>(batcher.name, { connection: parseUrl(redisUrl()) }));
}

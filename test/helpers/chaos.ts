import { Redis } from 'ioredis';
import type { ChildProcess } from 'node:child_process';
import { startWorkerProcess } from './processes';

/** Short BullMQ lock and stall check, short key lock and sweep: recovery windows of a second or two. */
const OPTIONS = { lockTtlMs: 2000, recoveryIntervalMs: 500, sliceSize: 10, backoff: { type: 'fixed', delayMs: 50 }, attempts: 1000 };
const WORKER = { concurrency: 4, lockDuration: 1000, stalledInterval: 500 };

/** redis-server arguments for a Redis that keeps its data (AOF) in `dir` across a restart on the same port. */
export const persistentRedis = (dir: string): string[] => ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', dir];

/** A worker process of the chaos test and the soak (test/fixtures/worker-process.ts, recording what it processes). */
export const startChaosWorker = (redisUrl: string, name: string): Promise<ChildProcess> =>
  startWorkerProcess({ redisUrl, name, options: OPTIONS, worker: WORKER, sliceDelayMs: 2 });

/** A client for the faults themselves: it retries quickly and never reports the outages it sees. */
export const adminClient = (port: number): Redis =>
  new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 3, retryStrategy: () => 50 }).on('error', () => {});

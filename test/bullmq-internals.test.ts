import { createRequire } from 'node:module';
import * as bullmq from 'bullmq';
import { describe, expect, it } from 'vitest';
import { bullmqScript } from '../src/bullmq';
import { BULLMQ_ADD_KEYS, BULLMQ_FINISH_KEYS } from '../src/storage/keys';
import { testConnection, uniqueName } from './helpers/redis';

/**
 * What batch-by-key takes from BullMQ beyond its documented API, each named, so that a BullMQ
 * upgrade that moves one fails here first, saying what moved (package.json pins the tested
 * minor version for this reason). The behaviour built on each is tested where it is used:
 * finish-in-claim.test.ts (the fused fetch and completion), push.test.ts (the inlined add and
 * its two-call fallback), processor.test.ts (add-job.lua's adds, under a key job's spare id).
 */
describe('the BullMQ internals batch-by-key relies on', () => {
  it('is the BullMQ minor version package.json pins', () => {
    const require = createRequire(import.meta.url);
    const installed = (require('bullmq/package.json') as { version: string }).version;
    const pinned = (require('../package.json') as { dependencies: Record<string, string> }).dependencies.bullmq!;
    expect(pinned, 'bullmq is pinned to a minor version (~x.y.z): its internals are not semver').toMatch(/^~\d+\.\d+\.\d+$/);
    expect(installed.split('.').slice(0, 2), `the installed BullMQ ${installed} is the pinned ${pinned}`).toEqual(
      pinned.slice(1).split('.').slice(0, 2),
    );
  });

  it('has the Lua scripts the claims and the push inline, with the key counts their arguments are built for', () => {
    for (const [name, keys] of [
      ['moveToActive', undefined],
      ['moveToFinished', BULLMQ_FINISH_KEYS.length],
      ['addStandardJob', BULLMQ_ADD_KEYS.length],
      ['addDelayedJob', undefined],
      ['addPrioritizedJob', undefined],
    ] as const) {
      const script = bullmqScript(name);
      expect(
        script.content.length,
        `bullmq/dist/cjs/scripts exports ${name}, inlined by fetch-and-claim.lua, claim-and-finish.lua, push.lua or add-job.lua`,
      ).toBeGreaterThan(0);
      if (keys !== undefined) expect(script.keys, `BullMQ's ${name} takes ${keys} keys (keys.ts derives them)`).toBe(keys);
    }
  });

  it('exports the Redis backend the worker hooks, with the methods engine/finisher.ts wraps and calls', async () => {
    expect(
      typeof bullmq.createRedisBackend,
      'bullmq exports createRedisBackend (engine/finisher.ts builds the worker backend with it)',
    ).toBe('function');
    expect(typeof bullmq.raw2NextJobData, 'bullmq exports raw2NextJobData (a claim-completed job hands BullMQ its next job)').toBe(
      'function',
    );
    const backend = bullmq.createRedisBackend(uniqueName('internals'), { connection: testConnection() as bullmq.ConnectionOptions });
    for (const method of ['execCommand', 'moveToCompleted', 'moveToCompletedArgs'] as const) {
      expect(typeof backend[method], `BullMQ's Redis backend has ${method}`).toBe('function');
    }
    expect(backend.moveToFinishedKeys, "BullMQ's Redis backend lists moveToFinished's keys").toHaveLength(BULLMQ_FINISH_KEYS.length);
    await backend.close();
  });

  it('has Job.addJob, which storage/job.ts calls with a capturing client to build the adds push.lua and add-job.lua inline', () => {
    expect(typeof bullmq.Job.prototype.addJob, 'Job.prototype.addJob exists').toBe('function');
  });

  it('has the Worker methods and state engine/shard-worker.ts overrides and reads, for one slot budget over every shard', () => {
    const proto = bullmq.Worker.prototype as unknown as Record<string, unknown>;
    for (const method of ['moveToActive', 'processJob', 'run', 'pause', 'resume', 'close']) {
      expect(typeof proto[method], `Worker.prototype.${method} exists`).toBe('function');
    }
    // The fetch of a job's end after it moved itself to delayed, made under the job's own token
    // (ShardWorker hands that fetch the job's slot), and the main loop's awaited fetches.
    const source = String(proto.handleFailed);
    expect(source, 'handleFailed fetches the next job with moveToActive(token, …) after a DelayedError').toMatch(
      /this\.moveToActive\(token/,
    );
    expect(String(proto.mainLoop), 'the main loop awaits each fetch before it starts the jobs fetched before it').toMatch(
      /await fetchedJob/,
    );
    // ShardWorker clears `drained` when it fetches nothing for want of a slot after BullMQ's blocking wait.
    expect(String(proto._getNextJob), '_getNextJob blocks on the queue marker while `drained`').toMatch(/this\.drained && block/);
  });
});

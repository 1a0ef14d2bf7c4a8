import { defineConfig } from 'vitest/config';
import base from './vitest.config.mts';

/**
 * The core suite against a real Redis Cluster (`npm run test:cluster`): test batchers connect
 * with an ioredis `Cluster` and no prefix, so the library's own cluster defaults are what run.
 * Left out, because what they test is tied to a standalone server: connection (URLs and
 * ioredis options name one server), faults (CLIENT KILL on one server), worker.crash and
 * examples (child processes that connect by URL), version (no Redis), cli (connects by URL),
 * dashboard (its browser test is about the page, not the Redis topology). In nestjs, the test
 * of a whole application process is skipped there (the child connects by URL).
 */
export default defineConfig({
  resolve: base.resolve,
  test: {
    ...base.test,
    globalSetup: ['./test/helpers/global-setup.cluster.ts'],
    include: [
      'test/cluster/**/*.test.ts',
      ...[
        'backpressure',
        'bull-board',
        'class-form',
        'completion-race',
        'concurrency-per-key',
        'context',
        'data',
        'dead-letters',
        'drop',
        'priority',
        'pending',
        'tickets',
        'ticket-events',
        'errors',
        'errors.infra',
        'failures',
        'flow-control',
        'global-limits',
        'global-limits.runs',
        'group-commit',
        'history',
        'producer',
        'input.property',
        'keys',
        'lock',
        'logger',
        'metrics',
        'nestjs',
        'one-job-per-key',
        'key-jobs',
        'per-id-outcome',
        'plain-path',
        'push',
        'push.outcomes',
        'processor',
        'progress',
        'recovery',
        'scheduling',
        'scripts',
        'shards',
        'stats',
        'store.set',
        'store.zset',
        'stranded-keys',
        'tracing',
        'validation',
        'wait-to-fill',
        'worker.shutdown',
        'worker.time-box',
      ].map((name) => `test/${name}.test.ts`),
    ],
    // The cluster's six servers share the machine's cores with the workers.
    exclude: ['node_modules/**'],
    testTimeout: 90_000,
  },
});

import { defineConfig } from 'vitest/config';

export default defineConfig({
  // The examples import 'batch-by-key' by name: tsconfig.json's `paths` map it to src/.
  resolve: { tsconfigPaths: true },
  test: {
    globalSetup: ['./test/helpers/global-setup.ts'],
    setupFiles: ['./test/helpers/setup.ts'],
    include: ['test/**/*.test.ts'],
    // Cluster-only tests run in `npm run test:cluster` (vitest.cluster.config.mts).
    exclude: ['test/cluster/**', 'node_modules/**'],
    testTimeout: 60_000,
    hookTimeout: 30_000,
    // Fault and race tests run worker processes of their own; two files at a time fit two cores.
    maxWorkers: 2,
  },
});

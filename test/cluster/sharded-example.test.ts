import { describe, expect, it, vi } from 'vitest';
import { inject } from 'vitest';

describe('examples/sharded-cluster.ts', () => {
  it('spreads the key jobs over three shards, changes to six under a running worker, and retires the old count', async () => {
    const nodes = inject('redisCluster');
    if (nodes === undefined) throw new Error('this test runs in the cluster suite');
    const { main } = await import('../../examples/sharded-cluster');
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      const { pushed, processed, counts } = await main(nodes, 60);
      expect(pushed).toBe(120);
      expect(processed).toBe(120);
      expect(counts).toEqual([6]);
      expect(log.mock.calls[0]![0]).toBe('shards: 3, so the worker serves 3 queues:');
    } finally {
      log.mockRestore();
    }
  });
});

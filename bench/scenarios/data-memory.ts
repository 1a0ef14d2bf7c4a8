import { Redis } from 'ioredis';
import { batchByKey } from '../../src';
import { fillFreshRedis } from '../lib/fill';
import { backlogCalls, keyNames } from '../lib/push';
import type { BenchRedis } from '../lib/redis';
import { ratio } from '../lib/stats';
import { redisOptions } from '../systems/shared';
import type { Producer } from '../systems/types';
import { fmtInt } from './common';
import type { Scenario } from './types';

/** A 100-byte payload (as JSON text), distinct per id so nothing is shared. */
const payloadOf = (id: string): { id: string; pad: string } => ({ id, pad: 'x'.repeat(100 - JSON.stringify({ id, pad: '' }).length) });

/** The floor: the same payloads HSET into one hash per key (id → JSON), nothing else. */
function bareHset(redis: Redis): Producer {
  return {
    push: async (key, ids) =>
      void (await redis.hset(`bare:{${key}}:data`, Object.fromEntries(ids.map((id) => [id, JSON.stringify(payloadOf(id))])))),
    close: async () => void (await redis.quit()),
  };
}

/** Ours: the ids with their payloads pushed through performBatchLater (no worker). */
function ours(redis: BenchRedis, store: 'list' | 'set'): Producer {
  const batcher = batchByKey({ name: `data-${store}`, connection: redisOptions(redis.url), store });
  return {
    push: async (key, ids) =>
      void (await batcher.performBatchLater(
        ids.map((id) => ({ id, data: payloadOf(id) })),
        { key },
      )),
    close: () => batcher.close(),
  };
}

/**
 * Data per id: Redis memory per pending id with a 100-byte payload, against a bare HSET of the
 * same payloads (the target: at most 1.3× that). Ours keeps the id in the store's
 * structure and its payload in a per-key hash.
 */
export const dataMemory: Scenario = {
  id: 'data-memory',
  async run(config) {
    const c = config.memory;
    const calls = () => backlogCalls(keyNames('key-', c.keys), c.idsPerKey, 1000);
    const bare = await fillFreshRedis((redis) => bareHset(new Redis(redisOptions(redis.url))), calls(), 4, c.timeoutMs, 'bare HSET');
    const rows = [];
    for (const store of ['list', 'set'] as const) {
      const fill = await fillFreshRedis((redis) => ours(redis, store), calls(), 4, c.timeoutMs, `ours ${store} with data`);
      rows.push({ store, ours: fill.bytesPerId, bare: bare.bytesPerId, ratio: ratio(fill.bytesPerId, bare.bytesPerId) });
    }
    return {
      id: 'data-memory',
      title: 'Memory of data per id',
      setup:
        `${fmtInt(c.keys * c.idsPerKey)} pending ids over ${c.keys} keys, each with a 100-byte JSON payload; Redis used_memory ` +
        `added by the push, per id, beside the same payloads HSET (id → JSON) into ${c.keys} bare hashes.`,
      columns: [
        { key: 'store', label: 'store' },
        { key: 'ours', label: 'ours bytes/id', digits: 1 },
        { key: 'bare', label: 'bare HSET bytes/id', digits: 1 },
        { key: 'ratio', label: 'ours / bare', digits: 2 },
      ],
      rows,
      ratios: rows.map((r) => ({
        name: `${r.store}: ours / bare HSET bytes per pending id with a 100-byte payload`,
        value: r.ratio,
        target: '<= 1.3',
      })),
      notes: [],
      details: { rows },
    };
  },
};

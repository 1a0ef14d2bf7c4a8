import { Redis } from 'ioredis';
import { fillFreshRedis } from '../lib/fill';
import { backlogCalls, keyNames } from '../lib/push';
import type { BenchRedis } from '../lib/redis';
import { ratio } from '../lib/stats';
import type { WorkloadResult } from '../lib/workload';
import { redisOptions } from '../systems/shared';
import type { OursVariant, Producer, SystemSpec } from '../systems/types';
import { drainWorkload, fmtInt, runSystems } from './common';
import type { Scenario } from './types';

type Kind = NonNullable<OursVariant['store']>;
const KINDS: readonly Kind[] = ['list', 'set', 'zset'];

/** The same ids in the bare structure, one per key: the floor any per-key store is measured against. */
function bareProducer(redis: Redis, kind: Kind): Producer {
  return {
    push: async (key, ids) => {
      const name = `bare:{${key}}:pending`;
      if (kind === 'list') await redis.rpush(name, ...ids);
      else if (kind === 'set') await redis.sadd(name, ...ids);
      else await redis.zadd(name, ...ids.flatMap((id) => [Date.now(), id]));
    },
    close: async () => void (await redis.quit()),
  };
}

async function bareBytesPerId(kind: Kind, keys: number, idsPerKey: number, timeoutMs: number): Promise<number> {
  const calls = backlogCalls(keyNames('key-', keys), idsPerKey, 1000);
  const producerFor = (redis: BenchRedis) => bareProducer(new Redis(redisOptions(redis.url)), kind);
  return (await fillFreshRedis(producerFor, calls, 4, timeoutMs, `bare ${kind}`)).bytesPerId;
}

/** Scenario 5: Redis bytes per pending id in each store beside the bare structure, and worker RSS over a drain. */
export const memory: Scenario = {
  id: 'memory',
  async run(config) {
    const c = config.memory;
    const ours: WorkloadResult[] = await runSystems(
      KINDS.map((store): SystemSpec => ({ id: 'ours', variant: { store } })),
      (system) => drainWorkload(config, system, c),
    );
    const bare: number[] = [];
    for (const kind of KINDS) bare.push(await bareBytesPerId(kind, c.keys, c.idsPerKey, c.timeoutMs));
    const rows = KINDS.map((kind, i) => {
      const r = ours[i]!;
      return {
        store: kind,
        ours: r.bytesPerPendingId,
        bare: bare[i]!,
        ratio: ratio(r.bytesPerPendingId, bare[i]),
        rss: `${r.workerRssReadyMb.toFixed(0)} → ${r.workerRssEndMb.toFixed(0)}`,
        idsPerSec: r.idsPerSec,
      };
    });
    return {
      id: 'memory',
      title: 'Memory',
      setup:
        `${fmtInt(c.keys * c.idsPerKey)} pending ids over ${c.keys} keys; Redis used_memory added by the push, per id, beside the ` +
        `same ids RPUSH/SADD/ZADDed into ${c.keys} bare keys. Then 1 worker process (concurrency ${c.concurrency}, empty handler) ` +
        `drains them.`,
      columns: [
        { key: 'store', label: 'store' },
        { key: 'ours', label: 'ours bytes/id', digits: 1 },
        { key: 'bare', label: 'bare bytes/id', digits: 1 },
        { key: 'ratio', label: 'ours / bare', digits: 2 },
        { key: 'rss', label: 'worker RSS MB (before → after drain)' },
        { key: 'idsPerSec', label: 'drain ids/s' },
      ],
      rows,
      ratios: rows.map((r) => ({ name: `${r.store}: ours / bare bytes per pending id`, value: r.ratio, target: '<= 1.5' })),
      notes: ['the zset store keeps a score (ready time) per id; the bare zset gets the same'],
      details: { ours, bareBytesPerId: Object.fromEntries(KINDS.map((k, i) => [k, bare[i]])) },
    };
  },
};

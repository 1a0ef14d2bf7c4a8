import { Redis } from 'ioredis';
import { fillFreshRedis, newTarget } from '../lib/fill';
import { backlogCalls, keyNames } from '../lib/push';
import { ratio } from '../lib/stats';
import { systemFor } from '../systems';
import { redisOptions } from '../systems/shared';
import type { Producer, SystemSpec } from '../systems/types';
import { fmtInt } from './common';
import type { Scenario } from './types';

const CALLERS = 16;

/** One id per key in a bare list: the floor, the id alone. */
function bareList(redis: Redis): Producer {
  return {
    push: async (key, ids) => void (await redis.rpush(`bare:{${key}}:pending`, ...ids)),
    close: async () => void (await redis.quit()),
  };
}

/**
 * What a key costs in Redis on its own, beside its ids: the memory scenario spreads it over
 * many ids per key, so this one gives every key a single pending id. Ours then holds, per key,
 * its pending list, its push mark, its entry in the batcher's index and its BullMQ job (a hash,
 * a deduplication key, a place in the wait list); one BullMQ job per id holds a job per id; a bare
 * list holds the id alone. The keys are the one-id-keys scenario's.
 */
export const keyMemory: Scenario = {
  id: 'key-memory',
  async run(config) {
    const keys = config.oneIdKeys.keys;
    const timeoutMs = config.oneIdKeys.timeoutMs;
    const calls = () => backlogCalls(keyNames('key-', keys), 1, 1);
    const systems: { label: string; spec?: SystemSpec }[] = [
      { label: 'ours', spec: { id: 'ours' } },
      { label: 'bullmq-per-id', spec: { id: 'bullmq-per-id' } },
      { label: 'bare list' },
    ];
    const rows: { system: string; keys: number; bytesPerKey: number }[] = [];
    for (const { label, spec } of systems) {
      const fill = await fillFreshRedis(
        (redis) => (spec ? systemFor(spec).producer(newTarget(redis)) : bareList(new Redis(redisOptions(redis.url)))),
        calls(),
        CALLERS,
        timeoutMs,
        `key-memory ${label}`,
      );
      rows.push({ system: label, keys: fill.ids, bytesPerKey: fill.bytesPerId });
    }
    const bytes = (label: string) => rows.find((r) => r.system === label)?.bytesPerKey;
    return {
      id: 'key-memory',
      title: 'Memory per key',
      setup:
        `${fmtInt(keys)} keys × 1 pending id (one push per key, ${CALLERS} concurrent callers, no worker); Redis used_memory ` +
        `added by the pushes, per key, its one id included.`,
      columns: [
        { key: 'system', label: 'system' },
        { key: 'keys', label: 'keys' },
        { key: 'bytesPerKey', label: 'Redis bytes per key (one pending id)', digits: 0 },
      ],
      rows,
      ratios: [
        { name: 'bytes per key with one pending id: ours / bullmq-per-id', value: ratio(bytes('ours'), bytes('bullmq-per-id')) },
        { name: 'bytes per key with one pending id: ours / bare list', value: ratio(bytes('ours'), bytes('bare list')) },
      ],
      notes: ["ours: the key's pending list, push mark, index entry and BullMQ job; bullmq-per-id: one job; bare list: the id alone"],
      details: { rows },
    };
  },
};

import { Redis } from 'ioredis';
import { sleep } from '../lib/clock';
import { chunk, redisOptions } from './shared';
import type { System } from './types';

/** Moves up to ARGV[1] ids from the head of pending (KEYS[1]) to in-flight (KEYS[2]); returns them. */
const CLAIM = `
local ids = redis.call('LPOP', KEYS[1], ARGV[1])
if ids then redis.call('RPUSH', KEYS[2], unpack(ids)) end
return ids`;

/** Exported so SLOWLOG analysis can name it. */
export const RAW_SCRIPTS = { claim: CLAIM };

const SLICE = 100;
/** How often consumers look for keys that appeared since (light keys pushed during a drain). */
const KEY_REFRESH_MS = 5;
/** A loop whose keys are all empty waits this long before its next pass. */
const IDLE_MS = 1;

type RawClient = Redis & { rawClaim(pending: string, inFlight: string, count: number): Promise<string[] | null> };

/**
 * The practical ceiling: the minimum a reliable per-key loop needs (claim to an in-flight list, ack
 * by deleting it), with no BullMQ, no lock, no fencing and no recovery. `concurrency` loops in one
 * process; each owns every Nth key found and takes one slice of each of its keys in turn.
 */
export function rawSystem(): System {
  const names = (namespace: string, key?: string) => ({
    keys: `raw:${namespace}:keys`,
    pending: `raw:${namespace}:{${key}}:pending`,
    inFlight: `raw:${namespace}:{${key}}:inflight`,
  });
  return {
    id: 'raw',
    label: 'raw ceiling',
    pushes: 'RPUSH 1,000 ids (+ SADD key), one pipeline',
    producer(target) {
      const redis = new Redis(redisOptions(target.url));
      return Promise.resolve({
        push: async (key, ids) => {
          const n = names(target.namespace, key);
          const pipeline = redis.pipeline();
          for (const part of chunk(ids, 1000)) pipeline.rpush(n.pending, ...part);
          pipeline.sadd(n.keys, key);
          for (const [err] of (await pipeline.exec()) ?? []) if (err) throw err;
        },
        close: async () => void (await redis.quit()),
      });
    },
    async consumer(target, options) {
      const redis = new Redis(redisOptions(target.url)) as RawClient;
      redis.defineCommand('rawClaim', { numberOfKeys: 2, lua: RAW_SCRIPTS.claim });
      const loops = options.concurrency;
      const owned: string[][] = Array.from({ length: loops }, () => []);
      const known = new Set<string>();
      let stopped = false;

      const refreshKeys = async () => {
        for (const key of await redis.smembers(names(target.namespace).keys)) {
          if (known.has(key)) continue;
          known.add(key);
          owned[known.size % loops]!.push(key);
        }
      };
      const loop = async (mine: string[]) => {
        while (!stopped) {
          let worked = false;
          for (const key of mine) {
            if (stopped) break;
            const n = names(target.namespace, key);
            const ids = await redis.rawClaim(n.pending, n.inFlight, SLICE);
            if (!ids) continue;
            worked = true;
            await options.handler(key, ids);
            await redis.del(n.inFlight);
          }
          if (!worked) await sleep(IDLE_MS);
        }
      };
      await refreshKeys();
      let timer: NodeJS.Timeout | undefined;
      let running: Promise<unknown> = Promise.resolve();
      return {
        start: () => {
          timer = setInterval(() => void refreshKeys().catch(() => undefined), KEY_REFRESH_MS);
          running = Promise.all(owned.map(loop));
        },
        close: async () => {
          stopped = true;
          clearInterval(timer);
          await running;
          await redis.quit();
        },
      };
    },
  };
}

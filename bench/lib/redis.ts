import { Redis } from 'ioredis';
import { startRedis } from '../../tools/redis-server';
import { withTimeout } from './clock';

/** The bench's own connection to the Redis under test: INFO, FLUSHALL, SLOWLOG. Never used by a system. */
export interface BenchRedis {
  url: string;
  admin: Redis;
  info(section: string): Promise<Record<string, string>>;
  usedMemory(): Promise<number>;
  /** CPU seconds of redis-server so far (user + system), in µs. */
  cpuMicros(): Promise<number>;
  version(): Promise<string>;
}

/** The admin connection's name, so SLOWLOG analysis can leave the bench's own commands out. */
export const ADMIN_CLIENT_NAME = 'bench-admin';

function parseInfo(text: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of text.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return fields;
}

function benchRedis(url: string, admin: Redis): BenchRedis {
  const info = async (section: string) => parseInfo(await admin.info(section));
  return {
    url,
    admin,
    info,
    usedMemory: async () => Number((await info('memory')).used_memory),
    cpuMicros: async () => {
      const cpu = await info('cpu');
      return (Number(cpu.used_cpu_user) + Number(cpu.used_cpu_sys)) * 1e6;
    },
    version: async () => (await info('server')).redis_version ?? 'unknown',
  };
}

let warnedShared = false;

/**
 * Runs `fn` against an empty Redis: a throwaway redis-server per call, or, with REDIS_URL, that
 * server after FLUSHALL. One per system and measurement, so no memory, keys, scripts or functions
 * leak from one system into the next one's figures.
 */
export async function withFreshRedis<T>(fn: (redis: BenchRedis) => Promise<T>): Promise<T> {
  const shared = process.env.REDIS_URL;
  if (shared && !warnedShared) {
    warnedShared = true;
    console.warn(`REDIS_URL is set: the bench runs FLUSHALL on ${shared} before every measurement`);
  }
  const local = shared ? undefined : await startRedis();
  const url = shared ?? local!.url;
  const admin = new Redis(url, { maxRetriesPerRequest: null, connectionName: ADMIN_CLIENT_NAME });
  try {
    await admin.flushall();
    await admin.script('FLUSH');
    // Redis 7+ (a REDIS_URL of Redis 6.2 has no FUNCTION command).
    await admin.call('FUNCTION', 'FLUSH').catch(() => undefined);
    await admin.config('RESETSTAT');
    return await fn(benchRedis(url, admin));
  } finally {
    await withTimeout(admin.quit(), 5_000, 'closing the admin connection').catch(() => admin.disconnect());
    await local?.stop();
  }
}

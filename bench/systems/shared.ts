/**
 * Connection options for a URL, accepted by ioredis and BullMQ alike (BullMQ's type wants plain
 * fields, not ioredis' RedisOptions); workers need `maxRetriesPerRequest: null` for blocking calls.
 */
export function redisOptions(url: string): { host: string; port: number; maxRetriesPerRequest: null } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379), maxRetriesPerRequest: null };
}

/** Splits ids into runs of at most `size`, keeping order. */
export function chunk<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** An 'error' event with no listener would crash a worker process; a crash of a peer is its own result. */
export function reportErrors(label: string): (err: unknown) => void {
  return (err) => console.error(`[${label}]`, err instanceof Error ? err.message : err);
}

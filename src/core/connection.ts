import { Redis, Cluster, type RedisOptions } from 'ioredis';
import { InvalidOptionError } from './errors';
import { log } from './logger';
import type { Connection, Logger } from './types';

/**
 * The URL with its password masked, whether it parses or not: error messages end up in logs. The
 * user info runs to the last `@` before the host's first `/`, so a password holding `@` is masked whole.
 */
export function redactUrl(url: string): string {
  return url.replace(/^((?:[^:/?#]*:)?\/\/)([^/?#]*)@/, (_match, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(':');
    return `${scheme}${colon < 0 ? userinfo : `${userinfo.slice(0, colon)}:***`}@`;
  });
}

/** `redis://[user:password@]host[:port][/db]` or `rediss://...` (TLS) as ioredis options, which BullMQ also takes. */
export function fromUrl(url: string): RedisOptions {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new InvalidOptionError(`options.connection is not a valid Redis URL: ${JSON.stringify(redactUrl(url))}`);
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') {
    throw new InvalidOptionError(`options.connection must be a redis:// or rediss:// URL, got ${u.protocol}//`);
  }
  const db = u.pathname.length > 1 ? Number(u.pathname.slice(1)) : 0;
  if (!Number.isInteger(db) || db < 0) throw new InvalidOptionError(`options.connection has a bad database number: ${u.pathname}`);
  return {
    // URL keeps an IPv6 host in brackets ('[::1]'); ioredis wants the bare address.
    host: u.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1',
    port: u.port ? Number(u.port) : 6379,
    db,
    ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
    ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
    ...(u.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}

function isClient(connection: Connection): connection is Redis | Cluster {
  return connection instanceof Redis || connection instanceof Cluster;
}

/** @internal */
export type RedisClient = Redis | Cluster;

/** Our command connection: the user's client when given one (theirs to close), else one we own. */
export function commandClient(connection: Redis | Cluster | RedisOptions, logger: Logger): { client: RedisClient; owned: boolean } {
  if (isClient(connection)) return { client: connection, owned: false };
  const client = new Redis(connection);
  // An 'error' event without a listener would crash the process; ioredis reconnects by itself.
  client.on('error', (err) => log(logger, 'warn', 'batch-by-key: redis connection error', { err }));
  return { client, owned: true };
}

const closeCounts = new WeakMap<RedisClient, { closes: number }>();

/**
 * How many times a connection of `client` has closed (for a Cluster, a connection to any of its
 * nodes), counted from the first call for that client. ioredis sends a command again only after
 * the connection it went out on closed (a standalone client resends what was unanswered when it
 * reconnects; a Cluster retries on another node after a failover), so a reply to a command during
 * which the count did not move answers the only time it was sent.
 */
export function connectionCloses(client: RedisClient): number {
  let count = closeCounts.get(client);
  if (!count) {
    const counted = { closes: 0 };
    const watch = (connection: Redis) => connection.on('close', () => counted.closes++);
    if (client instanceof Cluster) {
      for (const node of client.nodes()) watch(node);
      client.on('+node', watch);
    } else {
      watch(client);
    }
    closeCounts.set(client, (count = counted));
  }
  return count.closes;
}

/**
 * Ends a standalone client for good, as `disconnect()` does, and at once: its queued commands
 * fail and it emits 'end'. ioredis' own `disconnect()` does neither while the client waits to
 * reconnect (its stream is closed already; only its retry timer is cleared), so whatever waited on
 * the client, its 'end' event or a queued command, waited for ever. A connection attempt started
 * and closed at once takes ioredis' own way there: the attempt fails, which flushes the queues and
 * ends the client.
 */
export function endClient(client: RedisClient): void {
  if (client.status === 'reconnecting' && !(client instanceof Cluster)) client.connect().catch(() => undefined);
  client.disconnect();
}

import { Redis, Cluster } from 'ioredis';
import { log } from './logger';
import type { RedisClient } from './scripts';
import type { Connection, Logger } from './types';


export function isClient(connection: Connection): connection is Redis | Cluster {
  return connection instanceof Redis || connection instanceof Cluster;
}

/** Our command connection: the user's client when given one (theirs to close), else one we own. */
export function commandClient(connection: Connection, logger: Logger): { client: RedisClient; owned: boolean } {
  if (isClient(connection)) return { client: connection, owned: false };
  const client = new Redis(connection);
  // An 'error' event without a listener would crash the process; ioredis reconnects by itself.
  client.on('error', (err) => log(logger, 'warn', 'batch-by-key: redis connection error', { err }));
  return { client, owned: true };
}

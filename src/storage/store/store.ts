import type { KeyNames } from '../keys';
import type { StoreKind } from '../../core/types';

/** One read-only command: its name, the keys it names and its other arguments. */
export interface Read {
  command: 'LLEN' | 'SCARD' | 'ZCARD' | 'LINDEX' | 'GET' | 'ZRANGE' | 'HVALS' | 'EXISTS' | 'LRANGE' | 'SMEMBERS';
  keys: readonly string[];
  args?: readonly (string | number)[];
}

/**
 * One Redis structure per key for pending ids and one for in-flight ids. Pushes and claims are
 * Lua (see protocol.ts and `scripts/includes/store-<kind>.lua`); a store here knows how to read a
 * key's structures back: counts and the age of the oldest pending id.
 */
export interface Store {
  readonly kind: StoreKind;
  /** The read that counts the ids of one of its structures (pending, or a lane's in-flight). */
  size(key: string): Read;
  /** The read of every id of one of its structures: a lane's in-flight ids, at most a slice. */
  members(key: string): Read;
  /** A read whose reply `pendingSince` reads. */
  oldest(names: KeyNames): Read;
  /** When the oldest pending id was ready (zset), or no later than when it was pushed (list: at most one claim interval earlier; set); undefined when unknown. */
  pendingSince(reply: unknown): number | undefined;
}

import type { ChainableCommander } from 'ioredis';
import type { KeyNames } from '../keys';
import type { StoreKind } from '../../core/types';

/**
 * One Redis structure per key for pending ids and one for in-flight ids. Pushes and claims are
 * Lua (see protocol.ts and `scripts/claim-<kind>.lua`); a store here knows how to read a key's
 * structures back: counts and the age of the oldest pending id.
 */
export interface Store {
  readonly kind: StoreKind;
  /** Queues the command that counts the ids of one of its structures (pending, or a lane's in-flight). */
  size(pipeline: ChainableCommander, key: string): void;
  /** A command whose reply `pendingSince` reads. */
  oldest(pipeline: ChainableCommander, names: KeyNames): void;
  /** When the oldest pending id was pushed (list), ready (zset), or no later than (set); undefined when unknown. */
  pendingSince(reply: unknown): number | undefined;
}

import type { Key } from './types';

/**
 * Builds every Redis key name of a batcher, so no call site spells one.
 *
 * A user's key is percent-encoded (injective, and never contains `{`, `}` or `:`) and wrapped
 * in the only hash tag of the name, so all keys of one logical key hash to one Redis Cluster
 * slot, different logical keys spread over slots, and no two logical keys share a name.
 */
export interface KeyNames {
  pending: string;
  inFlight: string;
  lock: string;
  /** The id of the last claim applied, which makes a resent claim a no-op. */
  lastClaim: string;
  /** Failed slices in a row (a counter); deleted by the first slice that succeeds. */
  failures: string;
  /** Exists, with a TTL, while the key backs off after a failure; zset pushes do not cut it short. */
  backoff: string;
}

export class Keyspace {
  /** `${prefix}:${name}:bbk`, with any braces of the prefix dropped (see below). */
  readonly root: string;

  constructor(prefix: string, name: string) {
    // Redis Cluster hashes the first {tag} of a name; a BullMQ prefix like '{bull}' must not
    // become it, or every key of every account would land in one slot.
    this.root = `${prefix.replace(/[{}]/g, '')}:${name}:bbk`;
  }

  /** Keys that had pushes recently, scored by the time of the last push (recovery sweeps it). */
  get index(): string {
    return `${this.root}:keys`;
  }

  forKey(key: Key): KeyNames {
    const base = `${this.root}:{${encodeKey(key)}}`;
    return {
      pending: `${base}:pending`,
      inFlight: `${base}:inflight`,
      lock: `${base}:lock`,
      lastClaim: `${base}:claim`,
      failures: `${base}:failures`,
      backoff: `${base}:backoff`,
    };
  }
}

/** Also the BullMQ deduplication id of the key's job. Throws URIError on lone surrogates (validated earlier). */
export function encodeKey(key: Key): string {
  return encodeURIComponent(key);
}

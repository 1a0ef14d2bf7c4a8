import type { Key } from './types';

/**
 * Builds every Redis key name of a batcher, so no call site spells one.
 *
 * A user's key is percent-encoded (injective, and never contains `{`, `}` or `:`) and wrapped
 * in a hash tag, so all keys of one logical key hash to one Redis Cluster slot and no two
 * logical keys can produce the same names.
 */
export interface KeyNames {
  pending: string;
  inFlight: string;
  lock: string;
  /** The id of the last claim applied, which makes a resent claim a no-op. */
  lastClaim: string;
}

export class Keyspace {
  /** `${prefix}:${name}:bbk` */
  readonly root: string;

  constructor(prefix: string, name: string) {
    this.root = `${prefix}:${name}:bbk`;
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
    };
  }
}

/** Also the BullMQ deduplication id of the key's job. Throws URIError on lone surrogates (validated earlier). */
export function encodeKey(key: Key): string {
  return encodeURIComponent(key);
}

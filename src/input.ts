import { describe, InvalidIdsError, InvalidKeyError } from './errors';
import type { Id, Key } from './types';

/** Longest id accepted, in UTF-16 code units. */
export const MAX_ID_LENGTH = 1024;
/** Longest key accepted, in UTF-16 code units. */
export const MAX_KEY_LENGTH = 1024;

/** Turns what a caller pushes into stored ids, or throws before anything reaches Redis. */
export function normalizeIds(ids: unknown): Id[] {
  if (!Array.isArray(ids)) {
    throw new InvalidIdsError(`ids must be an array of strings or finite numbers, got ${describe(ids)}`);
  }
  const out: Id[] = new Array(ids.length);
  for (let i = 0; i < ids.length; i++) {
    const raw: unknown = ids[i];
    let id: string;
    if (typeof raw === 'string') {
      id = raw;
    } else if (typeof raw === 'number' && Number.isFinite(raw)) {
      id = String(raw);
    } else {
      throw new InvalidIdsError(`ids[${i}] must be a string or a finite number, got ${describe(raw)}`);
    }
    if (id.length === 0) throw new InvalidIdsError(`ids[${i}] is an empty string; ids must be non-empty`);
    if (id.length > MAX_ID_LENGTH) {
      throw new InvalidIdsError(`ids[${i}] is ${id.length} characters long; the limit is ${MAX_ID_LENGTH}`);
    }
    if (!id.isWellFormed()) {
      throw new InvalidIdsError(`ids[${i}] contains a lone UTF-16 surrogate and would not round-trip through Redis`);
    }
    out[i] = id;
  }
  return out;
}

export function validateKey(key: unknown, source: string): Key {
  if (typeof key !== 'string' || key.length === 0) {
    throw new InvalidKeyError(`${source} must be a non-empty string, got ${describe(key)}`);
  }
  if (key.length > MAX_KEY_LENGTH) {
    throw new InvalidKeyError(`${source} is ${key.length} characters long; the limit is ${MAX_KEY_LENGTH}`);
  }
  if (!key.isWellFormed()) {
    throw new InvalidKeyError(`${source} contains a lone UTF-16 surrogate`);
  }
  return key;
}

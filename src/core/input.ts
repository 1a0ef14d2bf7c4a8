import { describe, InvalidIdsError, InvalidKeyError } from './errors';
import type { Id, Key } from './types';

/** Longest id accepted, in UTF-16 code units. */
export const MAX_ID_LENGTH = 1024;
/** Longest key accepted, in UTF-16 code units. */
export const MAX_KEY_LENGTH = 1024;

/** Largest payload of one id, as JSON text in UTF-8 bytes: a claim of a slice moves all of its ids' data in one reply. */
export const MAX_DATA_BYTES = 64 * 1024;

/** A push's ids and, when any item carried data, one JSON text per id ('' for one without). */
export interface NormalizedPush {
  ids: Id[];
  payloads?: string[];
}

/**
 * Turns what a caller pushes (ids, or `{ id, data }` items) into stored ids and payloads, or
 * throws before anything reaches Redis.
 */
export function normalizeItems(items: unknown): NormalizedPush {
  if (!Array.isArray(items)) {
    throw new InvalidIdsError(`ids must be an array of strings, finite numbers or { id, data } items, got ${describe(items)}`);
  }
  let payloads: string[] | undefined;
  const ids = items.map((item: unknown, i) => {
    if (typeof item !== 'object' || item === null) return normalizeId(item, i);
    if (!('id' in item) || !('data' in item))
      throw new InvalidIdsError(
        `ids[${i}] must be a string, a finite number or { id, data }, got an object without ${'id' in item ? 'data' : 'id'}`,
      );
    payloads ??= new Array<string>(items.length).fill('');
    payloads[i] = payloadOf((item as { data: unknown }).data, i);
    return normalizeId((item as { id: unknown }).id, i);
  });
  return { ids, ...(payloads && { payloads }) };
}

function payloadOf(data: unknown, i: number): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(data);
  } catch (err) {
    throw new InvalidIdsError(`ids[${i}].data is not JSON-serialisable: ${(err as Error).message}`);
  }
  if (json === undefined)
    throw new InvalidIdsError(`ids[${i}].data is not JSON-serialisable (got ${describe(data)}); use null for "no value"`);
  const bytes = Buffer.byteLength(json);
  if (bytes > MAX_DATA_BYTES)
    throw new InvalidIdsError(
      `ids[${i}].data is ${bytes} bytes as JSON; the limit is ${MAX_DATA_BYTES} (MAX_DATA_BYTES): keep large data elsewhere and push ` +
        `its reference`,
    );
  return json;
}

/** Turns what a caller pushes into stored ids, or throws before anything reaches Redis. */
export function normalizeIds(ids: unknown): Id[] {
  if (!Array.isArray(ids)) {
    throw new InvalidIdsError(`ids must be an array of strings or finite numbers, got ${describe(ids)}`);
  }
  return ids.map((raw: unknown, i) => normalizeId(raw, i));
}

function normalizeId(raw: unknown, i: number): Id {
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
  return id;
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

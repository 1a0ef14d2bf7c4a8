import { now } from './clock';
import type { Producer } from '../systems/types';

/** One performBatchLater-sized call: a key and its ids. */
export type Call = readonly [key: string, ids: readonly string[]];

/**
 * The backlog of `keys.length` keys with `idsPerKey` ids each, as `callSize`-id calls that take the
 * keys in turn (many accounts pushing at once). Lazy, so a million ids never sit in one array.
 */
export function* backlogCalls(keys: readonly string[], idsPerKey: number, callSize: number): Generator<Call> {
  for (let offset = 0; offset < idsPerKey; offset += callSize) {
    const size = Math.min(callSize, idsPerKey - offset);
    for (let k = 0; k < keys.length; k++) {
      yield [keys[k]!, Array.from({ length: size }, (_, i) => String(k * idsPerKey + offset + i))];
    }
  }
}

export const keyNames = (prefix: string, count: number): string[] =>
  Array.from({ length: count }, (_, i) => `${prefix}${String(i).padStart(3, '0')}`);

/**
 * Sends every call through `callers` concurrent callers, each awaiting its call before the next
 * (a web server's request handlers). Returns the elapsed ms and how many ids went in.
 */
export async function pushAll(producer: Producer, calls: Iterable<Call>, callers: number): Promise<{ ms: number; ids: number }> {
  const iterator = calls[Symbol.iterator]();
  let ids = 0;
  const caller = async () => {
    for (let next = iterator.next(); !next.done; next = iterator.next()) {
      const [key, part] = next.value;
      await producer.push(key, part);
      ids += part.length;
    }
  };
  const start = now();
  await Promise.all(Array.from({ length: callers }, caller));
  return { ms: now() - start, ids };
}

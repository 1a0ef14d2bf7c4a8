import { AsyncLocalStorage } from 'node:async_hooks';
import { validateKey } from '../core/input';
import type { Key } from '../core/types';

const storage = new AsyncLocalStorage<Key>();

/**
 * Runs `fn` with `key` as the current key, so `performBatchLater(ids)` inside it (and in
 * anything it awaits) needs no key. Meant for a request middleware that knows the account.
 */
export function withKey<T>(key: Key, fn: () => T): T {
  return storage.run(validateKey(key, 'withKey(key)'), fn);
}

/** The key set by the nearest enclosing `withKey`, if any. */
export function currentKey(): Key | undefined {
  return storage.getStore();
}

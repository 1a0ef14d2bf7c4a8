import { currentKey } from './context';
import { describe, InvalidOptionError, MissingKeyError } from '../core/errors';
import { boolean, onlyKnownOptions, optionNames } from '../core/validate';
import { isHighPush } from '../core/priority';
import { normalizeItems, validateKey, type NormalizedPush } from '../core/input';
import type { Fill } from '../core/fill';
import { newTicket, parseTicket } from './progress';
import type { KeyLevel, Level } from '../storage/job';
import type { KeyNames, Keyspace } from '../storage/keys';
import type { PushCall } from '../storage/protocol';
import type { BatchByKeyOptions, Key, PerformOptions, PerformResult, PushItem, StoreKind } from '../core/types';

/**
 * The plan of a push: its input validated and what the batcher's options decide for its key,
 * before anything is sent (a bad input throws here, with nothing written). Only the key
 * resolver, the user's, may wait.
 */
export interface PushPlan {
  key: Key;
  /** What performBatchLater resolves with once the ids are stored. */
  result: PerformResult;
  /** A tracked push of no ids: a ticket settled at once. */
  emptyTicket?: { callback: boolean };
  /** A push of ids: what to store, and how. */
  store?: { names: KeyNames; push: NormalizedPush; how: StoreHow };
}

/** What the plan reads of the batcher: its options, each resolved for a key where it may vary by key. */
export interface PlanDeps {
  store: StoreKind;
  resolver: BatchByKeyOptions['key'];
  keyspace: Keyspace;
  /** Whether a tracked push asks for a callback when it settles, unless it says (the batcher has onTicketSettled). */
  callbacks: boolean;
  /** How long a ticket of a tracked push lives. */
  ticketTtlMs: number;
  /** The key's wait to fill (`minSliceSize`, `maxWaitMs`; see core/fill.ts `fillOf`), undefined for none. */
  fill: (key: Key) => Fill | undefined;
  /** The key's `maxPendingPerKey` (see backlog.ts `maxPendingOf`), undefined for none: a function's bad result throws. */
  maxPending: (key: Key) => number | undefined;
  /** The level of a key's new job (see storage/job.ts `keyLevels`): `priority(key)` ranks keys. */
  level: KeyLevel;
  /** Fair scheduling: a new key's job whose first push is more than a slice waits behind light ones (see scheduling.ts). */
  fair: boolean;
  sliceSize: number;
}

/** Every name `PerformOptions` has (the compiler holds the list to the type). */
const PERFORM_OPTIONS = optionNames<PerformOptions>()(['key', 'delayMs', 'track', 'ticket', 'callback', 'priority']);

/** Validates a push's input and options and works out its key's: everything before a write. */
export async function planPush(deps: PlanDeps, items: ReadonlyArray<PushItem>, options: PerformOptions): Promise<PushPlan> {
  if (typeof options === 'object' && options !== null) onlyKnownOptions('performBatchLater options', options, PERFORM_OPTIONS);
  const { ids, payloads } = normalizeItems(items);
  const delayMs = validateDelay(deps.store, options.delayMs);
  const high = isHighPush(options.priority);
  const track = boolean('options.track', options.track, false);
  const callback = options.callback === undefined ? deps.callbacks : boolean('options.callback', options.callback, false);
  const open = options.ticket === undefined ? undefined : parseTicket(options.ticket);
  if (open && track) throw new InvalidOptionError('pass either track: true (a ticket of its own) or ticket (an open ticket), not both');
  // Awaited only when the user's resolver returns a promise: every other push reaches its call in
  // as many steps, so pushes to one key go out in the order they were made (an await here for
  // some and not others let a push to an open ticket overtake one made before it).
  const resolved = open ? keyOfTicket(open.key, options.key) : resolveKey(deps.resolver, options.key);
  const key = typeof resolved === 'string' ? resolved : await resolved;
  const fill = deps.fill(key);
  if (track && ids.length === 0) return { key, result: { key, pushed: 0 }, emptyTicket: { callback } };
  const ticket = track ? newTicket(key) : undefined;
  const result: PerformResult = {
    key,
    pushed: ids.length,
    ...(ticket && { ticket: ticket.ticket }),
    ...(open && { ticket: options.ticket! }),
  };
  if (ids.length === 0) return { key, result };
  const maxPending = deps.maxPending(key);
  const tracked = ticket
    ? { id: ticket.id, ttlMs: deps.ticketTtlMs, callback }
    : open && { id: open.id, ttlMs: deps.ticketTtlMs, open: true };
  // A light newcomer queues FIFO before keys whose first push is bigger than a slice, and a
  // high-priority key's job before both.
  const level = deps.level(key, deps.fair && ids.length > deps.sliceSize ? 'heavy' : 'light');
  const how: StoreHow = { delayMs, ticket: tracked || undefined, maxPending, fill, high, level };
  return { key, result, store: { names: deps.keyspace.forKey(key), push: { ids, ...(payloads && { payloads }) }, how } };
}

/** A push to an open ticket goes to the ticket's key; a `key` given too must be the same. */
function keyOfTicket(ticketKey: Key, given: Key | undefined): Key {
  if (given !== undefined && validateKey(given, 'options.key') !== ticketKey) {
    throw new InvalidOptionError(
      `options.key ${JSON.stringify(given)} is not the key of options.ticket (${JSON.stringify(ticketKey)}); a ticket belongs to one key`,
    );
  }
  return ticketKey;
}

/** How a push is stored, beside its ids: everything its options and the batcher's decided for its key. */
export interface StoreHow {
  delayMs: number;
  ticket: PushCall['ticket'];
  /** The key's maxPendingPerKey, if it has one. */
  maxPending: number | undefined;
  /** The key's wait to fill, if it waits. */
  fill: Fill | undefined;
  /** A push with priority 'high'. */
  high: boolean;
  /** The level of the key's job, if the push adds it. */
  level: Level;
}

function validateDelay(store: StoreKind, delayMs: unknown): number {
  if (delayMs === undefined) return 0;
  if (store !== 'zset') {
    throw new InvalidOptionError(`delayMs needs store 'zset'; this batcher uses '${store}'`);
  }
  if (typeof delayMs !== 'number' || !Number.isInteger(delayMs) || delayMs < 0) {
    throw new InvalidOptionError(`delayMs must be an integer >= 0, got ${describe(delayMs)}`);
  }
  return delayMs;
}

function resolveKey(resolver: BatchByKeyOptions['key'], given: Key | undefined): Key | Promise<Key> {
  if (given !== undefined) return validateKey(given, 'options.key');
  const resolved = resolver?.();
  if (isThenable(resolved)) return Promise.resolve(resolved).then((key) => keyOrContext(key));
  return keyOrContext(resolved);
}

function keyOrContext(resolved: Key | undefined): Key {
  if (resolved !== undefined) return validateKey(resolved, 'the key resolver (options.key) result');
  const fromContext = currentKey();
  if (fromContext !== undefined) return fromContext;
  throw new MissingKeyError(
    'no key: pass { key } to performBatchLater, set a key resolver in the options, or call it inside withKey(key, fn)',
  );
}

function isThenable(value: unknown): value is PromiseLike<Key | undefined> {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';
}

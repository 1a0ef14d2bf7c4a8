import { Cluster } from 'ioredis';
import { bullmqSpelling, describe, InvalidOptionError } from './core/errors';
import { fromUrl } from './core/connection';
import { validateRateLimitOption } from './engine/flow';
import { validateGlobalLimits } from './engine/global-limits';
import type { LimitsInForce } from './storage/limits-protocol';
import { validateMaxPendingOption } from './push/backlog';
import { validateFillOptions } from './core/fill';
import type { RunOptions } from './engine/run-options';
import { MAX_CONCURRENCY_PER_KEY, MAX_PUSHES_PER_CALL, MAX_TIMER_MS } from './core/limits';
import { boolean, duration, integer, oneOf, onlyKnownOptions, optionalFunction, optionNames } from './core/validate';
import { HISTORY_DEFAULTS, validateHistoryOption, type ResolvedHistory } from './ops/history-options';
import { incidentLogger, silentLogger } from './core/logger';
import { validatePriorityOption } from './core/priority';
import { pushSpans } from './ops/tracing';
import type { OpenPushSpan } from './push/push-span';
import { MAX_SHARDS } from './storage/shards';
import type {
  Backoff,
  BatchByKeyOptions,
  CreateWorkerOptions,
  MaxPendingPerKey,
  MergePolicy,
  SliceMiddleware,
  StoreKind,
  FastPath,
} from './core/types';

/**
 * Options after defaults are applied. The handler is not among them: `createBatcher` takes it
 * apart, since the class form and the NestJS module supply theirs late (see class-form.ts).
 */
export interface ResolvedOptions extends RunOptions {
  name: string;
  connection: Exclude<BatchByKeyOptions['connection'], string>;
  key: BatchByKeyOptions['key'];
  maxDeadLetters: number;
  ticketTtlMs: number;
  prefix: string;
  shards: number;
  recoveryIntervalMs: number;
  pushTimeoutMs: number;
  pushesPerCall: number;
  pushLingerMs: number;
  /** `tracePushes`: opens each push's producer span; undefined when off (see ops/tracing.ts). */
  pushSpans: OpenPushSpan | undefined;
  merge: MergePolicy;
  maxPendingPerKey: MaxPendingPerKey | undefined;
  /** `false`: no sampling. */
  history: ResolvedHistory | false;
  fastPath: FastPath;
  /** The batcher-wide limits of this process's options (see engine/global-limits.ts). */
  globalLimits: LimitsInForce;
}

export const DEFAULTS = {
  store: 'list',
  sliceSize: 100,
  concurrencyPerKey: 1,
  maxRuntimeMs: 5 * 60_000,
  scheduling: 'fair',
  lockTtlMs: 30_000,
  shutdownTimeoutMs: 10_000,
  attempts: 5,
  backoff: { type: 'exponential', delayMs: 1_000, maxDelayMs: 60_000 },
  isolateFailures: true,
  maxDeadLetters: 10_000,
  ticketTtlMs: 24 * 3600_000,
  prefix: 'bull',
  shards: 1,
  recoveryIntervalMs: 60_000,
  pushTimeoutMs: 10_000,
  pushesPerCall: 100,
  pushLingerMs: 0,
  history: HISTORY_DEFAULTS,
  fastPath: 'auto',
} as const satisfies Partial<ResolvedOptions>;

/**
 * createWorker's `stalledInterval` unless given: half BullMQ's 30 s, so a SIGKILLed worker's keys
 * run again within `lockDuration` (30 s) plus this, 45 s at most, rather than 60 s (the key lock,
 * `lockTtlMs`, has expired by then). One stalled check per shard queue per interval and worker.
 */
export const WORKER_DEFAULTS = { stalledInterval: 15_000 } as const satisfies Partial<CreateWorkerOptions>;

export const STORES: readonly StoreKind[] = ['list', 'set', 'zset'];
const NAME = /^[A-Za-z0-9._-]{1,100}$/;
/** Ids per slice at most: a slice is moved by one Lua call, which blocks Redis while it runs. */
const MAX_SLICE_SIZE = 10_000;
/**
 * Abandoning a slice that is merely slow reprocesses it, so the default timeout never goes below
 * this, even with a small maxRuntimeMs.
 */
const MIN_DEFAULT_SLICE_TIMEOUT_MS = 60_000;
/** Sweeping more often than this only loads Redis. */
const MIN_RECOVERY_INTERVAL_MS = 100;
/** A ticket must outlive at least the push that creates it. */
const MIN_TICKET_TTL_MS = 1_000;
/** Short TTLs would expire between renewals on a busy event loop. */
const MIN_LOCK_TTL_MS = 1_000;
export { MAX_TIMER_MS };

/** Redis Cluster hashes what lies between a name's first `{` and the next `}`, when that is not empty. */
const HASH_TAG = /^[^{]*\{[^}]+\}/;

/**
 * BullMQ's prefix when none is given. On a Redis Cluster every key of a queue must hash to one
 * slot (BullMQ's scripts touch several), so the prefix carries a hash tag; the batcher's name as
 * the tag puts different batchers' queues in different slots rather than all in one.
 */
export function defaultPrefix(name: string, cluster: boolean): string {
  return cluster ? `${DEFAULTS.prefix}:{${name}}` : DEFAULTS.prefix;
}

function validatePrefix(prefix: unknown, name: string, cluster: boolean): string {
  if (prefix === undefined) return defaultPrefix(name, cluster);
  if (typeof prefix !== 'string' || prefix.length === 0) {
    throw new InvalidOptionError(`options.prefix must be a non-empty string, got ${describe(prefix)}`);
  }
  if (cluster && !HASH_TAG.test(prefix)) {
    // Without one, BullMQ's scripts fail with CROSSSLOT at the first push.
    throw new InvalidOptionError(
      `options.prefix must contain a {hash tag} on a Redis Cluster, such as '{${prefix}}', got ${describe(prefix)}`,
    );
  }
  return prefix;
}

/** createWorker's own connection must suit the batcher's prefix, which was chosen for the batcher's connection. */
export function validateWorkerConnection(connection: unknown, prefix: string): void {
  if (connection instanceof Cluster && !HASH_TAG.test(prefix)) {
    throw new InvalidOptionError(
      `createWorker got a Redis Cluster connection, but the batcher's prefix ${JSON.stringify(prefix)} has no {hash tag} ` +
        '(its own connection is not a Cluster): give the batcher the Cluster too, or a prefix with a {hash tag}',
    );
  }
}

const isDelay = (value: unknown): value is number =>
  typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= MAX_TIMER_MS;

function validateBackoff(backoff: unknown): Backoff {
  if (backoff === undefined) return DEFAULTS.backoff;
  if (typeof backoff === 'function') return backoff as Backoff;
  if (typeof backoff === 'object' && backoff !== null) {
    const b = backoff as Record<string, unknown>;
    if ((b.type === 'fixed' || b.type === 'exponential') && isDelay(b.delayMs) && (b.maxDelayMs === undefined || isDelay(b.maxDelayMs))) {
      return backoff as Backoff;
    }
  }
  throw new InvalidOptionError(
    `options.backoff must be { type: 'fixed' | 'exponential', delayMs, maxDelayMs? } with delays between 0 and ${MAX_TIMER_MS} ms, or ` +
      `(attempt, error) => ms; got ${describe(backoff)}${bullmqSpelling(backoff, 'delay', 'delayMs')}`,
  );
}

function validateAround(around: unknown): readonly SliceMiddleware[] {
  if (around === undefined) return [];
  const list = Array.isArray(around) ? around : [around];
  if (list.every((m) => typeof m === 'function')) return list as SliceMiddleware[];
  throw new InvalidOptionError('options.around must be a middleware (slice, next) => Promise<void>, or an array of them');
}

const FAST_PATHS: readonly FastPath[] = ['auto', 'off'];

/** `fastPath`'s default: `BATCH_BY_KEY_FAST_PATH` when set (checked as the option is), else 'auto'. */
function fastPathDefault(): FastPath {
  const env = process.env.BATCH_BY_KEY_FAST_PATH;
  return env === undefined || env === ''
    ? DEFAULTS.fastPath
    : oneOf('the environment variable BATCH_BY_KEY_FAST_PATH', env, FAST_PATHS, DEFAULTS.fastPath);
}

/** Every option `batchByKey` takes (the compiler holds the list to the type). */
export const BATCH_BY_KEY_OPTIONS = optionNames<BatchByKeyOptions>()([
  'name',
  'connection',
  'store',
  'sliceSize',
  'minSliceSize',
  'maxWaitMs',
  'concurrencyPerKey',
  'maxRuntimeMs',
  'scheduling',
  'weight',
  'priority',
  'sliceTimeoutMs',
  'lockTtlMs',
  'shutdownTimeoutMs',
  'key',
  'eachIteration',
  'merge',
  'attempts',
  'backoff',
  'isolateFailures',
  'maxDeadLetters',
  'ticketTtlMs',
  'around',
  'prefix',
  'shards',
  'recoveryIntervalMs',
  'pushTimeoutMs',
  'pushesPerCall',
  'pushLingerMs',
  'tracePushes',
  'rateLimit',
  'globalRateLimit',
  'globalConcurrency',
  'maxPendingPerKey',
  'onTicketSettled',
  'history',
  'logger',
  'fastPath',
]);

/** Validates everything up front, so a typo fails at startup and not at the first push. */
export function resolveOptions(options: BatchByKeyOptions): ResolvedOptions {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError(`options must be an object, got ${describe(options)}`);
  }
  const o = options as Partial<BatchByKeyOptions>;
  onlyKnownOptions('batchByKey options', o, BATCH_BY_KEY_OPTIONS);
  if (typeof o.name !== 'string' || !NAME.test(o.name)) {
    throw new InvalidOptionError(
      `options.name must be 1-100 letters, digits, '.', '_' or '-' (it names the BullMQ queue), got ${describe(o.name)}`,
    );
  }
  if (o.connection === undefined || o.connection === null || (typeof o.connection !== 'object' && typeof o.connection !== 'string')) {
    throw new InvalidOptionError('options.connection is required: a Redis URL, ioredis options or an ioredis client');
  }
  const store = oneOf('options.store', o.store, STORES, DEFAULTS.store);
  if (o.logger !== undefined && (typeof o.logger !== 'object' || o.logger === null)) {
    throw new InvalidOptionError('options.logger must be console-like: { debug?, info?, warn?, error? }');
  }
  const merge = oneOf<MergePolicy>('options.merge', o.merge, ['replace', 'keep', 'all'], 'replace');
  if (o.merge !== undefined && store === 'list') {
    throw new InvalidOptionError(
      "options.merge means nothing with store 'list': each push of an id is its own entry with its own data " +
        "(use store 'set' or 'zset' to merge)",
    );
  }
  const maxRuntimeMs = duration('options.maxRuntimeMs', o.maxRuntimeMs, DEFAULTS.maxRuntimeMs);
  const { pushTimeoutMs, pushLingerMs } = pushDeadlines(o.pushTimeoutMs, o.pushLingerMs);
  const sliceSize = integer('options.sliceSize', o.sliceSize, DEFAULTS.sliceSize, 1, MAX_SLICE_SIZE);
  // Checked here with the rest, though batchByKey hands the handler to the batcher itself.
  optionalFunction('options.eachIteration', o.eachIteration, '(ids, ctx) => ...');
  return {
    name: o.name,
    connection: typeof o.connection === 'string' ? fromUrl(o.connection) : o.connection,
    store,
    sliceSize,
    fill: validateFillOptions(o.minSliceSize, o.maxWaitMs, sliceSize),
    concurrencyPerKey: integer('options.concurrencyPerKey', o.concurrencyPerKey, DEFAULTS.concurrencyPerKey, 1, MAX_CONCURRENCY_PER_KEY),
    maxRuntimeMs,
    scheduling: oneOf('options.scheduling', o.scheduling, ['fair', 'fifo'], DEFAULTS.scheduling),
    weight: optionalFunction('options.weight', o.weight, '(key) => number'),
    priority: validatePriorityOption(o.priority, o.scheduling),
    sliceTimeoutMs: duration('options.sliceTimeoutMs', o.sliceTimeoutMs, Math.max(maxRuntimeMs, MIN_DEFAULT_SLICE_TIMEOUT_MS)),
    lockTtlMs: duration('options.lockTtlMs', o.lockTtlMs, DEFAULTS.lockTtlMs, MIN_LOCK_TTL_MS),
    shutdownTimeoutMs: duration('options.shutdownTimeoutMs', o.shutdownTimeoutMs, DEFAULTS.shutdownTimeoutMs, 0),
    key: optionalFunction('options.key', o.key, 'returning the current key'),
    attempts: integer('options.attempts', o.attempts, DEFAULTS.attempts, 1),
    backoff: validateBackoff(o.backoff),
    isolateFailures: boolean('options.isolateFailures', o.isolateFailures, DEFAULTS.isolateFailures),
    maxDeadLetters: integer('options.maxDeadLetters', o.maxDeadLetters, DEFAULTS.maxDeadLetters, 1),
    ticketTtlMs: integer('options.ticketTtlMs', o.ticketTtlMs, DEFAULTS.ticketTtlMs, MIN_TICKET_TTL_MS),
    around: validateAround(o.around),
    prefix: validatePrefix(o.prefix, o.name, o.connection instanceof Cluster),
    shards: integer('options.shards', o.shards, DEFAULTS.shards, 1, MAX_SHARDS),
    recoveryIntervalMs: duration('options.recoveryIntervalMs', o.recoveryIntervalMs, DEFAULTS.recoveryIntervalMs, MIN_RECOVERY_INTERVAL_MS),
    pushTimeoutMs,
    pushesPerCall: integer('options.pushesPerCall', o.pushesPerCall, DEFAULTS.pushesPerCall, 1, MAX_PUSHES_PER_CALL),
    pushLingerMs,
    pushSpans: pushSpans(boolean('options.tracePushes', o.tracePushes, false)),
    rateLimit: validateRateLimitOption(o.rateLimit),
    globalLimits: validateGlobalLimits(o.globalRateLimit, o.globalConcurrency),
    maxPendingPerKey: validateMaxPendingOption(o.maxPendingPerKey),
    merge,
    onTicketSettled: optionalFunction('options.onTicketSettled', o.onTicketSettled, '(outcome, ticket) => ...'),
    history: validateHistoryOption(o.history),
    fastPath: o.fastPath === undefined ? fastPathDefault() : oneOf('options.fastPath', o.fastPath, FAST_PATHS, DEFAULTS.fastPath),
    logger: incidentLogger(o.logger ?? silentLogger),
  };
}

/**
 * `pushTimeoutMs` and `pushLingerMs`, which one push spends both of: a lone push lingers first,
 * so a linger at or above the deadline would time out every push made to an idle lane.
 */
function pushDeadlines(timeout: unknown, linger: unknown): { pushTimeoutMs: number; pushLingerMs: number } {
  const pushTimeoutMs = duration('options.pushTimeoutMs', timeout, DEFAULTS.pushTimeoutMs);
  const pushLingerMs = duration('options.pushLingerMs', linger, DEFAULTS.pushLingerMs, 0);
  if (pushLingerMs >= pushTimeoutMs) {
    throw new InvalidOptionError(
      `options.pushLingerMs (${pushLingerMs}) must be below options.pushTimeoutMs (${pushTimeoutMs}): a push to an idle lane ` +
        `lingers that long before it is sent, and would always time out`,
    );
  }
  return { pushTimeoutMs, pushLingerMs };
}

import type Redlock from 'redlock';
import type { DeadLetterBox } from './dead-letters';
import type { FailureDeps } from './failures';
import type { GlobalLimits } from './global-limits';
import type { RunOptions } from './run-options';
import type { BatcherEmitter } from '../core/events';
import type { QueueLists } from '../storage/batcher-protocol';
import { keyLevels, type KeyLevel } from '../storage/job';
import type { KeyJobs } from '../storage/key-job';
import { KeySession, type SessionEnv } from '../storage/key-session';
import type { Keyspace } from '../storage/keys';
import type { LockRef } from '../storage/protocol';
import type { RedisClient } from '../storage/scripts';
import type { TicketOutbox } from '../storage/ticket-outbox';
import type { EachIteration, Key, StoreKind } from '../core/types';

/**
 * What every run of a batcher's key jobs needs and no run changes: built once (runtime/workers.ts),
 * shared by every run of every worker of the batcher in this process. A run's own state is its
 * `KeyRun`'s; what a worker keeps between runs (the fused path's first claims) is its `FusedClaims`'s (claims/fused.ts).
 * @internal
 */
export class RunEnv implements SessionEnv, FailureDeps {
  readonly client: RedisClient;
  readonly outbox: TicketOutbox;
  readonly redlock: Redlock;
  readonly keyspace: Keyspace;
  readonly options: RunOptions;
  /** The handler, read at each run (a NestJS provider may resolve it late). */
  readonly handler: () => EachIteration;
  readonly deadLetters: DeadLetterBox;
  readonly events: BatcherEmitter;
  /** BullMQ's wait, active, delayed and prioritized structures of the batcher's shard queues (fair scheduling reads them). */
  readonly queueLists: () => readonly QueueLists[];
  /** Resolves when this worker's store is the batcher's (checked at the first run; see agreement.ts). */
  readonly agree: () => Promise<void>;
  /** Lists a key in its recovery index (storage/batcher-protocol.ts `listForRecovery`). */
  readonly listForRecovery: (key: Key) => Promise<void>;
  /** The batcher-wide limits (see global-limits.ts). */
  readonly limits: GlobalLimits;
  /** The one owner of a key's BullMQ job (storage/key-job.ts): a run's hand-on and requeue go through it. */
  readonly keyJobs: KeyJobs;
  /** The level of a key's job (`priority(key)` ranks keys; see scheduling.ts). */
  readonly level: KeyLevel;

  constructor(parts: Omit<RunEnv, 'store' | 'level' | 'session'>) {
    this.client = parts.client;
    this.level = keyLevels(parts.options.priority, parts.options.logger);
    this.outbox = parts.outbox;
    this.redlock = parts.redlock;
    this.keyspace = parts.keyspace;
    this.options = parts.options;
    this.handler = parts.handler;
    this.deadLetters = parts.deadLetters;
    this.events = parts.events;
    this.queueLists = parts.queueLists;
    this.agree = parts.agree;
    this.listForRecovery = parts.listForRecovery;
    this.limits = parts.limits;
    this.keyJobs = parts.keyJobs;
  }

  /** The batcher's store, as its options say (what a session's scripts are told). */
  get store(): StoreKind {
    return this.options.store;
  }

  /** A run's session of `key` under its lock. */
  session(key: Key, lock: LockRef): KeySession {
    return new KeySession(this, key, this.keyspace.forKey(key), lock);
  }
}

import { describe, InvalidOptionError } from '../core/errors';
import { validateKey } from '../core/input';
import { performBatchLater, type EnqueueDeps } from '../push/enqueue';
import { Committer } from '../storage/committer';
import { progress, waitFor } from '../push/progress';
import { openTicket, sealTicket } from '../push/tickets';
import { keyLevels } from '../storage/job';
import { KeyJobs } from '../storage/key-job';
import { fillOf } from '../core/fill';
import { maxPendingOf } from '../push/backlog';
import type { BatcherRuntime } from './runtime';
import type { Key, PerformOptions, PerformResult, Progress, PushItem, Ticket, WaitForOptions } from '../core/types';

/** What a controller calls: pushes, and the tickets that follow them. */
export class Producer {
  private enqueueDepsBuilt: EnqueueDeps | undefined;

  constructor(private readonly runtime: BatcherRuntime) {}

  async push(ids: ReadonlyArray<PushItem>, options?: PerformOptions): Promise<PerformResult> {
    const result = await performBatchLater(this.enqueueDeps(), ids, options);
    if (result.pushed > 0) this.runtime.events.emit('pushed', { key: result.key, count: result.pushed });
    return result;
  }

  /** At close: pushes lingering for others (pushLingerMs) go out before the connection closes. */
  flush(): void {
    this.enqueueDepsBuilt?.store.committer.flush();
  }

  async progress(ticket: Ticket): Promise<Progress> {
    return progress(this.runtime.client(), this.runtime.keyspace, ticket);
  }

  async waitFor(ticket: Ticket, options?: WaitForOptions): Promise<Progress> {
    return waitFor(this.runtime.client(), this.runtime.keyspace, this.runtime.ticketChannel, ticket, options, this.runtime.closedSignal);
  }

  async openTicket(key: Key, options?: { callback?: boolean }): Promise<Ticket> {
    const callback = options?.callback;
    if (callback !== undefined && typeof callback !== 'boolean') {
      throw new InvalidOptionError(`openTicket callback must be a boolean, got ${describe(callback)}`);
    }
    return openTicket(this.runtime.ticketOutbox(), validateKey(key, 'key'), callback ?? this.runtime.opts.onTicketSettled !== undefined);
  }

  async sealTicket(ticket: Ticket): Promise<void> {
    return sealTicket(this.runtime.ticketOutbox(), ticket);
  }

  /** Built on the first push (it needs the connection), and checked open on every one. */
  private enqueueDeps(): EnqueueDeps {
    const { runtime } = this;
    const { opts } = runtime;
    const client = runtime.client();
    return (this.enqueueDepsBuilt ??= {
      plan: {
        store: opts.store,
        resolver: opts.key,
        keyspace: runtime.keyspace,
        callbacks: opts.onTicketSettled !== undefined,
        ticketTtlMs: opts.ticketTtlMs,
        fill: (key) => fillOf(opts.fill, key, opts.sliceSize),
        maxPending: (key) => maxPendingOf(opts.maxPendingPerKey, key),
        level: keyLevels(opts.priority, opts.logger),
        fair: opts.scheduling === 'fair',
        sliceSize: opts.sliceSize,
      },
      store: {
        client,
        shard: (key) => runtime.shards.forKey(key),
        store: opts.store,
        merge: opts.merge,
        agree: () => runtime.agreement.check('push'),
        committer: new Committer(client, { maxPushes: opts.pushesPerCall, lingerMs: opts.pushLingerMs }),
        keyJobs: new KeyJobs(client, (key) => runtime.shards.of(key)),
      },
      tickets: runtime.ticketOutbox(),
      client,
      timeoutMs: opts.pushTimeoutMs,
      ...(opts.pushSpans && { spans: opts.pushSpans }),
    });
  }
}

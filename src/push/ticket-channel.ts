import { Redis, type Cluster } from 'ioredis';
import { endClient } from '../core/connection';
import { log } from '../core/logger';
import type { Logger } from '../core/types';
import type { RedisClient } from '../storage/scripts';

/** Called when a ticket may have changed: a message for it, or a reconnect that may have lost one. */
export type TicketListener = () => void;

/**
 * One subscriber connection per batcher, opened on the first `waitFor`, that hears the scripts'
 * ticket messages (includes/tracking.lua `announceTicket`) and wakes the waiters of each ticket.
 *
 * Pub/sub delivers at most once: a message sent while the connection is down is lost. So each
 * reconnect wakes every waiter (ioredis subscribes again by itself), waiters also read on a timer,
 * and a subscription that fails (a user the ACL denies the channel) leaves them on that timer
 * alone. Memory is bounded by the waiters: a channel is subscribed while one of its tickets has a
 * waiter, and Redis keeps nothing for it.
 */
export class TicketChannel {
  private subscriber: RedisClient | undefined;
  /** channel → ticket id → its waiters. */
  private readonly waiters = new Map<string, Map<string, Set<TicketListener>>>();
  /** Subscriptions being made or made, per channel: a waiter starts reading once its own is settled. */
  private readonly subscribed = new Map<string, Promise<boolean>>();
  private deniedLogged = false;
  /** The subscriber connection a `close` is quitting. */
  private closing: RedisClient | undefined;

  constructor(
    private readonly client: () => RedisClient,
    private readonly logger: Logger,
  ) {}

  /**
   * Registers `listener` for ticket `id` on `channel`, at once, and subscribes the channel unless
   * it is already. `subscribed(waitMs)` resolves once Redis has confirmed the subscription (or
   * refused it), so a read made afterwards cannot miss a change announced after it, or after
   * `waitMs` (Redis away: the subscription goes on, and the waiter reads on its timer).
   * `unlisten` unregisters it (and unsubscribes the channel when it was the last).
   */
  listen(
    channel: string,
    id: string,
    listener: TicketListener,
  ): { subscribed: (waitMs: number) => Promise<unknown>; unlisten: () => void } {
    let tickets = this.waiters.get(channel);
    if (!tickets) this.waiters.set(channel, (tickets = new Map<string, Set<TicketListener>>()));
    let listeners = tickets.get(id);
    if (!listeners) tickets.set(id, (listeners = new Set<TicketListener>()));
    listeners.add(listener);
    let subscription = this.subscribed.get(channel);
    if (!subscription) {
      subscription = this.subscribe(channel);
      this.subscribed.set(channel, subscription);
    }
    const confirmed = subscription;
    return {
      subscribed: async (waitMs) => {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([confirmed, new Promise((resolve) => (timer = setTimeout(resolve, waitMs)))]);
        clearTimeout(timer);
      },
      unlisten: () => this.unlisten(channel, id, listener),
    };
  }

  async close(): Promise<void> {
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    // Kept for `drop`, should its QUIT go unanswered.
    this.closing = subscriber;
    this.waiters.clear();
    this.subscribed.clear();
    if (!subscriber) return;
    // Like the command connection's close: nothing to flush on a connection that is not ready.
    if (subscriber.status === 'ready') await subscriber.quit().catch(() => endClient(subscriber));
    else endClient(subscriber);
  }

  /**
   * Ends the subscriber connection at once, its QUIT unanswered: the batcher's close gives up on
   * a Redis that is up but does not answer (see runtime.ts `CLOSE_QUIT_WAIT_MS`).
   */
  drop(): void {
    const subscriber = this.closing ?? this.subscriber;
    this.subscriber = undefined;
    if (subscriber) endClient(subscriber);
  }

  /** Subscribes `channel`: true once Redis confirmed it, false when it refused (logged once). */
  private subscribe(channel: string): Promise<boolean> {
    const subscription: Promise<boolean> = this.connection()
      .subscribe(channel)
      .then(
        () => true,
        (err: unknown) => {
          // Only its own entry: a later waiter may have made a newer subscription of the channel meanwhile.
          if (this.subscribed.get(channel) === subscription) this.subscribed.delete(channel);
          if (!this.deniedLogged) {
            this.deniedLogged = true;
            log(this.logger, 'warn', 'batch-by-key: waitFor cannot subscribe to ticket messages; it reads progress every pollMs instead', {
              err,
            });
          }
          return false;
        },
      );
    return subscription;
  }

  private unlisten(channel: string, id: string, listener: TicketListener): void {
    const tickets = this.waiters.get(channel);
    const listeners = tickets?.get(id);
    if (!tickets || !listeners) return;
    listeners.delete(listener);
    if (listeners.size > 0) return;
    tickets.delete(id);
    if (tickets.size > 0) return;
    this.waiters.delete(channel);
    const subscription = this.subscribed.get(channel);
    this.subscribed.delete(channel);
    // After the subscribe settles, so an UNSUBSCRIBE never overtakes its SUBSCRIBE's reply; and
    // not when a new waiter of the channel came meanwhile.
    void subscription?.then((ok) => {
      if (ok && !this.waiters.has(channel)) this.subscriber?.unsubscribe(channel).catch(() => {});
    });
  }

  private connection(): RedisClient {
    if (this.subscriber) return this.subscriber;
    const base = this.client();
    // A duplicate keeps the user's options (TLS, ACL user, Cluster nodes); a subscribed connection
    // can send nothing else, so it is never the command connection.
    // autoResubscribe: a reconnect subscribes every channel again, whatever the user's options say.
    const subscriber: Redis | Cluster = base instanceof Redis ? base.duplicate({ autoResubscribe: true }) : base.duplicate();
    subscriber.on('error', (err: Error) => log(this.logger, 'warn', 'batch-by-key: ticket channel connection error', { err }));
    subscriber.on('message', (channel: string, id: string) => this.wake(this.waiters.get(channel)?.get(id)));
    // ioredis subscribes again on reconnect; anything announced while it was away is lost.
    subscriber.on('ready', () => this.wakeAll());
    this.subscriber = subscriber;
    return subscriber;
  }

  private wakeAll(): void {
    for (const tickets of this.waiters.values()) for (const listeners of tickets.values()) this.wake(listeners);
  }

  private wake(listeners: Set<TicketListener> | undefined): void {
    if (listeners) for (const listener of [...listeners]) listener();
  }
}

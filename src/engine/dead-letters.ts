import { describe, InvalidOptionError, KeyBacklogFullError } from '../core/errors';
import { log } from '../core/logger';
import { integer, oneOf } from '../core/validate';
import { normalizeIds, validateKey } from '../core/input';
import { deadLettersOf, encodeKey, type DeadNames, type Keyspace } from '../storage/keys';
import { addDeadLetters, removeDeadLetters, trimDeadLetters, undoDeadLetters, type WrittenLetters } from '../storage/batcher-protocol';
import type { RedisClient } from '../storage/scripts';
import { parsePayloads } from '../storage/protocol';
import type { DeadLetter, DeadLetterListOptions, DeadLetterQuery, DeadLetters, Id, Key, Logger, PushItem } from '../core/types';

/** Letters read and moved per round trip by requeue and purge. */
const BATCH = 1000;
const MAX_PAGE = 1000;

/** What a dead letter keeps of an error (failures.ts `serializeError`), and a ticket's errors too. */
export interface SerializedError {
  name: string;
  message: string;
  stack?: string;
}

/** The ids a failure dead-letters, with what their letters record of it (failures.ts `FailurePlan` is one). */
export interface DeadIds {
  dead: readonly Id[];
  /** Failed runs of the slice, this one included. */
  attempts: number;
  firstFailedAt: number;
  /** When this run failed. */
  failedAt: number;
}

export interface DeadLetterDeps {
  client: () => RedisClient;
  keyspace: Keyspace;
  maxDeadLetters: number;
  /** Pushes ids back to a key by the store's rules (performBatchLater). */
  push: (key: Key, items: PushItem[]) => Promise<unknown>;
  logger: Logger;
}

function fieldOf(key: Key, id: Id): string {
  return `${encodeKey(key)}:${id}`;
}

/**
 * The batcher's dead letters, in its own hash slot: a hash of entries, indexed by time of last
 * failure (globally, for the cap and the default order, and per key) and by attempts.
 */
export class DeadLetterBox implements DeadLetters {
  private readonly names: DeadNames;

  constructor(private readonly deps: DeadLetterDeps) {
    this.names = deps.keyspace.dead;
  }

  /**
   * Writes the dead ids of a failed slice, before the fenced fail-slice (see failures.ts `settleFailure`): what it
   * wrote, and what it replaced, so `undo` can take it back if fail-slice refuses the failure. Each id
   * records `error`, or, given `own` (one per dead id, for ids the handler failed by `ctx.fail`), its own.
   */
  async add(
    key: Key,
    plan: DeadIds,
    error: SerializedError,
    payloadsJson: string | undefined,
    own?: readonly SerializedError[],
  ): Promise<WrittenLetters> {
    const payloads = payloadsJson === undefined ? undefined : parsePayloads(payloadsJson);
    const dataOf = (id: Id) => (payloads && Object.hasOwn(payloads, id) ? JSON.stringify(payloads[id]) : '');
    return addDeadLetters(this.deps.client(), this.names, {
      encodedKey: encodeKey(key),
      key,
      attempts: plan.attempts,
      firstFailedAt: plan.firstFailedAt,
      failedAt: plan.failedAt,
      error: JSON.stringify(error),
      ids: plan.dead,
      payloads: plan.dead.map(dataOf),
      ...(own && { errors: own.map((e) => JSON.stringify(e)) }),
    });
  }

  /**
   * Takes back what `add` wrote for a failure fail-slice refused (the writer had lost the lock):
   * each letter that is still the one written goes back to the one it replaced, or away.
   */
  async undo(written: WrittenLetters): Promise<void> {
    await undoDeadLetters(this.deps.client(), this.names, written);
  }

  /** Applies `maxDeadLetters` once a failure's letters stand: evicts the oldest past it. */
  async trim(): Promise<number> {
    return trimDeadLetters(this.deps.client(), this.names, this.deps.maxDeadLetters);
  }

  async list(options: DeadLetterListOptions = {}): Promise<{ letters: DeadLetter[]; cursor?: string }> {
    const key = options.key === undefined ? undefined : validateKey(options.key, 'deadLetters.list key');
    const limit = integer('deadLetters.list limit', options.limit, 100, 1, MAX_PAGE);
    const offset = cursorOffset(options.cursor);
    const order = oneOf('deadLetters.list order', options.order, ['time', 'attempts'], 'time');
    const client = this.deps.client();
    // One more than the page tells whether another page follows.
    let fields: string[];
    if (key === undefined) {
      const index = order === 'time' ? this.names.byTime : this.names.byAttempts;
      fields = await client.zrevrange(index, offset, offset + limit);
    } else if (order === 'time') {
      fields = await client.zrevrange(deadLettersOf(this.names, key), offset, offset + limit);
    } else {
      // A key's letters by attempts: its fields (bounded by the cap) sorted here.
      const all = await client.zrange(deadLettersOf(this.names, key), 0, -1);
      const scores = all.length > 0 ? await client.zmscore(this.names.byAttempts, ...all) : [];
      fields = all
        .map((field, i) => ({ field, attempts: Number(scores[i] ?? 0) }))
        .sort((a, b) => b.attempts - a.attempts)
        .slice(offset, offset + limit + 1)
        .map((x) => x.field);
    }
    const more = fields.length > limit;
    const letters = await this.read(fields.slice(0, limit));
    return { letters, ...(more && { cursor: String(offset + limit) }) };
  }

  async count(options: { key?: Key } = {}): Promise<number> {
    if (options.key === undefined) return this.deps.client().hlen(this.names.entries);
    return this.deps.client().zcard(deadLettersOf(this.names, validateKey(options.key, 'deadLetters.count key')));
  }

  async requeue(query: DeadLetterQuery = {}): Promise<number> {
    const fields = await this.select(query);
    let requeued = 0;
    // Keys whose push was refused for their backlog (maxPendingPerKey): each key is judged on its
    // own, so the others go on, and a full key's letters stay, none of them pushed after the refusal.
    const full = new Set<Key>();
    for (let i = 0; i < fields.length; i += BATCH) {
      const letters = await this.read(fields.slice(i, i + BATCH));
      const byKey = new Map<Key, DeadLetter[]>();
      for (const letter of letters) if (!full.has(letter.key)) byKey.set(letter.key, [...(byKey.get(letter.key) ?? []), letter]);
      for (const [key, ofKey] of byKey) {
        // Pushed before the letters go: a crash in between leaves a letter too many, never an id lost.
        try {
          await this.deps.push(key, ofKey.flatMap(itemsOf));
        } catch (err) {
          if (!(err instanceof KeyBacklogFullError)) throw err;
          full.add(key);
          log(this.deps.logger, 'warn', `deadLetters.requeue left the letters of key ${JSON.stringify(key)}: ${err.message}`, {
            key,
            limit: err.limit,
            pending: err.pending,
          });
          continue;
        }
        await this.remove(
          ofKey.flatMap((l) => [fieldOf(key, l.id), l.lastFailedAt]),
          true,
        );
        requeued += ofKey.length;
      }
    }
    return requeued;
  }

  async purge(query: DeadLetterQuery = {}): Promise<number> {
    const fields = await this.select(query);
    let purged = 0;
    for (let i = 0; i < fields.length; i += BATCH) {
      purged += await this.remove(
        fields.slice(i, i + BATCH).flatMap((field) => [field, 0]),
        false,
      );
    }
    return purged;
  }

  async evicted(): Promise<number> {
    return Number((await this.deps.client().get(this.names.evicted)) ?? 0);
  }

  /** The fields a query names, validated before anything is read. */
  private async select(query: DeadLetterQuery): Promise<string[]> {
    const key = query.key === undefined ? undefined : validateKey(query.key, 'deadLetters key');
    const ids = query.ids === undefined ? undefined : normalizeIds(query.ids);
    const client = this.deps.client();
    if (key !== undefined && ids !== undefined) return ids.map((id) => fieldOf(key, id));
    const all = await client.zrange(key === undefined ? this.names.byTime : deadLettersOf(this.names, key), 0, -1);
    if (ids === undefined) return all;
    const wanted = new Set(ids);
    return all.filter((field) => wanted.has(field.slice(field.indexOf(':') + 1)));
  }

  private async read(fields: string[]): Promise<DeadLetter[]> {
    if (fields.length === 0) return [];
    const values = await this.deps.client().hmget(this.names.entries, ...fields);
    return values.filter((v): v is string => v !== null).map(parseLetter);
  }

  private async remove(fieldsAndTimes: (string | number)[], onlyUnchanged: boolean): Promise<number> {
    if (fieldsAndTimes.length === 0) return 0;
    return removeDeadLetters(this.deps.client(), this.names, fieldsAndTimes, onlyUnchanged);
  }
}

/** A stored letter; one with data gets `data`, its latest payload, beside `payloads`. */
function parseLetter(json: string): DeadLetter {
  const letter = JSON.parse(json) as DeadLetter;
  return letter.payloads && letter.payloads.length > 0 ? { ...letter, data: letter.payloads.at(-1) } : letter;
}

/** What a requeue pushes for a letter: its id with each payload it carried, or the bare id. */
function itemsOf(letter: DeadLetter): PushItem[] {
  return letter.payloads && letter.payloads.length > 0 ? letter.payloads.map((data) => ({ id: letter.id, data })) : [letter.id];
}

function cursorOffset(cursor: unknown): number {
  if (cursor === undefined) return 0;
  if (typeof cursor !== 'string' || !/^\d{1,9}$/.test(cursor)) {
    throw new InvalidOptionError(`deadLetters.list cursor must be the cursor of a previous page, got ${describe(cursor)}`);
  }
  return Number(cursor);
}

import type { ChainableCommander } from 'ioredis';
import { MAX_CONCURRENCY_PER_KEY } from '../core/limits';
import type { Id, KeyInFlight, PendingId, PendingPage, RetryingSlice, RunningSlice, StoreKind } from '../core/types';
import { laneNames, type KeyNames } from './keys';
import type { RetrySlice } from './protocol';
import { callScript, type RedisClient } from './scripts';
import type { Store } from './store';

/**
 * What an operator reads of one key beyond its counts (`backlog`): a page of its pending ids, and
 * the slices its runs hold or wait to run again. Read only; every read of a call is of one key,
 * whose names share one Cluster slot, so each call is one script or one transaction.
 */

/** A page request, validated (see runtime/operations.ts): `cursor` only for the set store. */
export interface PageRequest {
  levels: 'both' | 'high' | 'normal';
  offset: number;
  cursor: string;
  limit: number;
}

/** A page of pending ids (see pending-page.lua, which reads it in one call). */
export async function pendingPage(client: RedisClient, store: StoreKind, names: KeyNames, request: PageRequest): Promise<PendingPage> {
  const reply = (await callScript(client, 'pending-page', [names.base], { store, ...request })) as (string | number)[];
  const [high, normal, next] = reply;
  const ids: PendingId[] = [];
  for (let i = 3; i < reply.length; i += 4) {
    const readyAt = reply[i + 3];
    ids.push({
      id: String(reply[i]),
      level: reply[i + 1] === 'high' ? 'high' : 'normal',
      payloads: parsedPayloads(String(reply[i + 2])),
      ...(readyAt !== '' && { readyAt: Number(readyAt) }),
    });
  }
  const page: PendingPage = { ids, high: Number(high), normal: Number(normal) };
  if (next !== '') page.next = store === 'set' ? { cursor: String(next) } : { offset: Number(next) };
  return page;
}

/**
 * A field of the key's data (JSON texts, each followed by '\n'), as `ctx.payloads` gives it: an
 * empty line is a push without data, which the claim leaves out (see includes/payloads.lua).
 */
function parsedPayloads(text: string): unknown[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as unknown);
}

/**
 * The slices runs of the key hold, per lane (every lane's names are read: a run with
 * `concurrencyPerKey` > 1 may use any), and its failed slices backing off, by due time: a
 * transaction, so one moment's.
 */
export async function keyInFlight(client: RedisClient, store: Store, names: KeyNames): Promise<KeyInFlight> {
  const lanes = Array.from({ length: MAX_CONCURRENCY_PER_KEY }, (_, lane) => laneNames(names, lane));
  const multi = client.multi();
  for (const lane of lanes) {
    const members = store.members(lane.inFlight);
    multi.call(members.command, ...members.keys, ...(members.args ?? []));
    multi.get(lane.inFlightSlice);
    multi.exists(lane.inFlightHigh);
  }
  multi.zrange(names.retry, 0, -1, 'WITHSCORES');
  multi.hgetall(names.retrySlices);
  const reply = await replies(multi);
  const running: RunningSlice[] = [];
  for (const lane of lanes.keys()) {
    const [ids, slice, high] = reply.slice(lane * 3, lane * 3 + 3) as [Id[], string | null, number];
    if (ids.length === 0) continue;
    const attempts = slice === null ? 0 : (JSON.parse(slice) as RetrySlice).attempts;
    running.push({ lane, ids, attempt: attempts + 1, high: high === 1 });
  }
  const [due, slices] = reply.slice(lanes.length * 3) as [string[], Record<string, string>];
  const retrying: RetryingSlice[] = [];
  for (let i = 0; i < due.length; i += 2) {
    const json = slices[due[i]!];
    // Both are written in one call (fail-slice.lua, claim-key.lua): a missing entry is skipped, not thrown on.
    if (json === undefined) continue;
    const slice = JSON.parse(json) as RetrySlice;
    retrying.push({
      sliceId: due[i]!,
      ids: slice.ids,
      attempts: slice.attempts,
      dueAt: Number(due[i + 1]),
      firstFailedAt: slice.firstFailedAt,
    });
  }
  return { running, retrying };
}

async function replies(multi: ChainableCommander): Promise<unknown[]> {
  return ((await multi.exec()) ?? []).map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}

import { setTimeout as sleep } from 'node:timers/promises';
import {
  fusedBackendProblem,
  fusedScriptsProblem,
  redisBackend,
  routeFetches,
  type BackendFactory,
  type QueueBaseOptions,
  type RedisQueueBackend,
} from '../../bullmq';
import { incidentBackoffMs } from '../../core/limits';
import { isReplyError } from '../../core/redis-errors';
import { fastScriptsProblem } from '../../storage/scripts';
import type { FusedClaims } from './fused';

/** How a worker's backend is made: the plain one on a Cluster or with `fastPath: 'off'`; `warn` hears why 'auto' fell back to it. */
export interface BackendMode {
  plain: boolean;
  warn: (problem: string) => void;
}

/**
 * Why the fused path cannot run on `backend` with the installed BullMQ, or undefined when it can:
 * BullMQ's scripts and backend members it inlines and hooks (bullmq/fused-path.ts), and our
 * scripts that inline them, fetch-and-claim.lua and claim-and-finish.lua (built, see
 * storage/scripts `FAST_PATH`). The check `fastPath: 'auto'` makes when a worker starts.
 */
export function fastPathProblem(backend: RedisQueueBackend): string | undefined {
  return fusedScriptsProblem() ?? fastScriptsProblem() ?? fusedBackendProblem(backend);
}

/**
 * A BullMQ backend factory for a `createWorker` worker: BullMQ's Redis backend, whose fetches and
 * completions `claims` fuses runs into (see fused.ts) unless `mode` is plain or the installed
 * BullMQ does not allow it, and whose refused fetches wait.
 */
export function workerBackend(claims: FusedClaims, mode: BackendMode): BackendFactory<RedisQueueBackend> {
  return (name: string, opts: QueueBaseOptions, options?: Parameters<BackendFactory>[2]) => {
    const backend = redisBackend(name, opts, options);
    if (!mode.plain) {
      const problem = fastPathProblem(backend);
      if (problem) mode.warn(problem);
      else claims.fuse(backend);
    }
    delayRefusedFetches(backend);
    return backend;
  };
}

/**
 * BullMQ's worker fetches again at once when Redis refuses a fetch with an error reply (out of
 * memory, a busy script; it waits only after a lost connection): with concurrency 4, an incident
 * of 1.8 s saw a thousand fetches a second, each logged. A refused fetch answers after the
 * incident backoff instead, doubling with each refusal in a row, so a worker's fetches slow down
 * to one a second per slot at most (a close waits that long at most for one on its way).
 */
function delayRefusedFetches(backend: RedisQueueBackend): void {
  let refused = 0;
  routeFetches(backend, async (_flat, send) => {
    try {
      const reply = await send();
      refused = 0;
      return reply;
    } catch (err) {
      if (!isReplyError(err)) throw err;
      await sleep(incidentBackoffMs(++refused));
      throw err;
    }
  });
}

import type { Job, RedisQueueBackend } from 'bullmq';
import { answerCompletions, backendProblem, completionCall, nextJobData, routeCommands } from './backend';
import { splitCall, type BullmqCall, type SentArg } from './calls';
import { bullmqScript } from './scripts';
import { BULLMQ_FINISH_ARGS, BULLMQ_FINISH_KEYS } from './layout';

/**
 * BullMQ's side of a worker whose runs are fused into BullMQ's own calls (see engine/claims): which
 * of its backend's calls is a fetch, what a fetch's reply and a completion's call look like, and
 * how its completion of a job completed elsewhere is answered. Generic: what a fetch or a
 * completion carries besides BullMQ's own is the caller's.
 */

/** Completion templates kept at most: far more than a worker's concurrency. */
const MAX_TEMPLATES = 10_000;

/** The name of BullMQ's fetch script (bullmq `moveToActive-11.lua`), as its backend's `execCommand` gets it. */
const FETCH = 'moveToActive';

/**
 * Whether a completion's keys are what a script can derive from BullMQ's arguments (the queue
 * prefix, its 7th, with BULLMQ_FINISH_KEYS; see finish-job.lua) and its arguments sit where
 * `FinishCalls` sets them: true for the BullMQ this was written against; a BullMQ that builds them
 * otherwise gets its keys sent, as built.
 */
export function derivable(call: BullmqCall, jobId: string, fetchNext: boolean): boolean {
  const { keys, args } = call;
  const prefix = args[BULLMQ_FINISH_ARGS.prefix];
  return (
    typeof prefix === 'string' &&
    args[BULLMQ_FINISH_ARGS.jobId] === jobId &&
    typeof args[BULLMQ_FINISH_ARGS.timestamp] === 'number' &&
    args[BULLMQ_FINISH_ARGS.fetchNext] === (fetchNext ? 1 : 0) &&
    keys.length === BULLMQ_FINISH_KEYS.length &&
    BULLMQ_FINISH_KEYS.every((name, i) => keys[i] === prefix + (name === '' ? jobId : name))
  );
}

/** Why the installed BullMQ's scripts are not those a fused fetch and completion inline (moveToActive, moveToFinished with its keys), or undefined. */
export function fusedScriptsProblem(): string | undefined {
  try {
    bullmqScript(FETCH);
    const keys = bullmqScript('moveToFinished').keys;
    if (keys !== BULLMQ_FINISH_KEYS.length) return `its moveToFinished takes ${keys} keys, not ${BULLMQ_FINISH_KEYS.length}`;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
  return undefined;
}

/** Why `backend` lacks what a fused path hooks or calls, or builds its completion's keys otherwise, or undefined. */
export function fusedBackendProblem(backend: RedisQueueBackend): string | undefined {
  const problem = backendProblem(backend);
  if (problem) return problem;
  if (backend.moveToFinishedKeys.length !== BULLMQ_FINISH_KEYS.length) {
    return `its backend builds ${backend.moveToFinishedKeys.length} moveToFinished keys, not ${BULLMQ_FINISH_KEYS.length}`;
  }
  return undefined;
}

let fetchKeys: number | undefined;

/** How many of a fetch's flat list (see `routeFetches`) are its keys: its arguments follow them. */
export function fetchKeyCount(): number {
  return (fetchKeys ??= bullmqScript(FETCH).keys);
}

/**
 * Routes every fetch of `backend` (BullMQ's moveToActive) through `route`, which may send it as
 * BullMQ would (`send`) or send a call of its own with the same keys and arguments (`flat`, as
 * BullMQ built it: see `fetchKeyCount`). The backend's other calls go as they are.
 */
export function routeFetches(backend: RedisQueueBackend, route: (flat: unknown[], send: () => unknown) => unknown): void {
  routeCommands(backend, (command, flat, send) => (command === FETCH ? route(flat, send) : send()));
}

/**
 * BullMQ's completions (moveToFinished) of a worker's jobs that a script of ours makes in its
 * stead: the call that completes a job, and, once it did, BullMQ's own completion of that job
 * answered with its reply (BullMQ reads it as its own: the next job, or an error code, and
 * emits its events as usual).
 */
export class FinishCalls {
  /** moveToFinished replies of jobs completed elsewhere, by job id, until BullMQ's completion asks. */
  private readonly replies = new Map<string, { reply: unknown; finishedOn: number }>();
  /** BullMQ's moveToFinished arguments of a completion, by worker token (see `callFor`). */
  private readonly templates = new Map<string, { args: readonly SentArg[]; removeOnComplete: unknown; attempts: unknown }>();

  constructor(private readonly backend: RedisQueueBackend) {
    answerCompletions(backend, (job) => {
      const done = job.id === undefined ? undefined : this.replies.get(job.id);
      if (!done) return undefined;
      this.replies.delete(job.id!);
      return Promise.resolve({ result: nextJobData(done.reply as unknown[]), finishedOn: done.finishedOn });
    });
  }

  /**
   * BullMQ's moveToFinished call that completes `job` under `token`, fetching the next job when
   * `fetchNext`; `derived` when its keys are left out, for the script to derive (see `derivable`).
   */
  callFor(job: Job, token: string, fetchNext: boolean): { call: BullmqCall; derived: boolean } {
    const jobId = job.id!;
    const template = this.templates.get(token);
    if (template && template.removeOnComplete === job.opts.removeOnComplete && template.attempts === job.opts.attempts) {
      const args: SentArg[] = template.args.slice();
      args[BULLMQ_FINISH_ARGS.jobId] = jobId;
      args[BULLMQ_FINISH_ARGS.timestamp] = Date.now();
      args[BULLMQ_FINISH_ARGS.fetchNext] = fetchNext ? 1 : 0;
      return { call: { keys: [], args }, derived: true };
    }
    const { flat, keys } = completionCall(this.backend, job, job.opts.removeOnComplete, token, fetchNext);
    const call = splitCall(flat, keys);
    if (!derivable(call, jobId, fetchNext)) return { call, derived: false };
    // BullMQ packs its options (the token among them) per call; they are the same for every job
    // this token completes with the same removeOnComplete and attempts, so later calls copy these
    // arguments and set what changes.
    if (this.templates.size >= MAX_TEMPLATES) this.templates.clear();
    this.templates.set(token, { args: call.args, removeOnComplete: job.opts.removeOnComplete, attempts: job.opts.attempts });
    return { call: { keys: [], args: call.args }, derived: true };
  }

  /** `call` (from `callFor`) completed `jobId` with `reply`: BullMQ's completion of that job gets it, and sends nothing. */
  completed(jobId: string, call: BullmqCall, reply: unknown): void {
    // The completion's timestamp is BullMQ's `finishedOn`.
    this.replies.set(jobId, { reply, finishedOn: Number(call.args[BULLMQ_FINISH_ARGS.timestamp]) });
  }
}

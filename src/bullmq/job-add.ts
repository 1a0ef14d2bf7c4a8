import { Job, type JobsOptions, type Queue } from 'bullmq';
import { splitCall, type BullmqCall } from './calls';
import { bullmqScript } from './scripts';

/** Which of BullMQ's adds of a job with no parent BullMQ chose: its standard, delayed or prioritized add. */
export type AddKind = 'standard' | 'delayed' | 'prioritized';

/**
 * BullMQ's adds of a job with no parent, by the script name its backend runs each under (its
 * command is that name, a colon and the script's SHA: `addStandardJob:<sha>`), with how many keys
 * each takes; then come `ADD_ARGS` arguments: its packed arguments, the job's data and its packed
 * options. Mirrors bullmq `src/classes/scripts.ts` `addJob` and `src/commands/add*Job-*.lua`.
 */
const ADDS = new Map<string, { kind: AddKind; keys: number }>([
  ['addStandardJob', { kind: 'standard', keys: bullmqScript('addStandardJob').keys }],
  ['addDelayedJob', { kind: 'delayed', keys: bullmqScript('addDelayedJob').keys }],
  ['addPrioritizedJob', { kind: 'prioritized', keys: bullmqScript('addPrioritizedJob').keys }],
]);
const ADD_ARGS = 3;

/**
 * BullMQ's add of a new job, built by BullMQ but not sent: which add BullMQ chose, its keys (the
 * first `keys` of `flat`) and arguments (the rest) as its backend would send them, for a script
 * of ours to make inside its own call.
 */
export interface CapturedAdd {
  kind: AddKind;
  call: BullmqCall;
  /** Takes the reply of the script that made the add as BullMQ's, and resolves when BullMQ has read it. */
  done: (reply: unknown) => Promise<void>;
}

/**
 * Runs BullMQ's `Job.addJob` for a new job of `queue` against a client that sends nothing: the
 * one script call BullMQ makes reaches `runCommand` (its command name and its keys and arguments
 * flat), whose promise answers it. So BullMQ alone decides which add a job takes and builds its
 * arguments. Mirrors bullmq `src/classes/job.ts` `addJob`, which calls `scripts.addJob(client, …)`
 * and, through it, the backend's `runCommand`. Undefined when BullMQ did not build one of the adds
 * `ADDS` knows at once: then nothing is sent or pending.
 */
export function captureAdd<Data, Name extends string>(
  queue: Queue<Data, void, Name>,
  name: Name,
  data: Data,
  opts: JobsOptions,
): CapturedAdd | undefined {
  let captured: { kind: AddKind; call: BullmqCall } | undefined;
  let answer!: (reply: unknown) => void;
  const reply = new Promise<unknown>((resolve) => (answer = resolve));
  const runCommand = (command: string, flat: unknown[]): Promise<unknown> => {
    const add = ADDS.get(command.slice(0, command.indexOf(':')));
    if (add && flat.length === add.keys + ADD_ARGS) captured = { kind: add.kind, call: splitCall(flat, add.keys) };
    return reply;
  };
  const job = new Job(queue, name, data, opts);
  const added = job.addJob({ runCommand } as unknown as Parameters<typeof job.addJob>[0]);
  if (!captured) {
    answer(null);
    added.catch(() => undefined);
    return undefined;
  }
  return {
    ...captured,
    done: async (result) => {
      answer(result);
      await added;
    },
  };
}

/**
 * The keys of BullMQ's adds a push may make inside its own script call, each the queue's prefix
 * followed by one of these, in BullMQ's order: as bullmq `src/classes/redis-queue-backend.ts`
 * `addStandardJobArgs` and `addDelayedJobArgs` build them from `queue.keys`. A push derives
 * them in Lua, and only where the installed BullMQ built exactly these (storage/key-job.ts).
 */
export const PUSH_ADD_KEYS = {
  standard: ['wait', 'paused', 'meta', 'id', 'completed', 'delayed', 'active', 'events', 'marker'],
  delayed: ['marker', 'meta', 'id', 'delayed', 'completed', 'events'],
} as const;

/** Which of BullMQ's adds a push makes in its own call (see `PUSH_ADD_KEYS`). */
export type PushAddKind = keyof typeof PUSH_ADD_KEYS;

/** A queue's prefix (`prefix:name:`): BullMQ names a job's hash by it and the job's id (bullmq `QueueKeys.toKey`). */
export function queuePrefix(queue: Pick<Queue, 'toKey'>): string {
  return queue.toKey('');
}

/** The name of the hash of the job `jobId` on `queue` (bullmq `QueueKeys.toKey`): a key in the queue's slot. */
export function jobKey(queue: Queue, jobId: string): string {
  return queue.toKey(jobId);
}

/**
 * The queue's prefix where BullMQ names each of `lists` (a field of bullmq's `QueueKeys`, the
 * suffix a script of ours derives for it) the prefix followed by that suffix; undefined where the
 * installed BullMQ names one otherwise.
 */
export function prefixNaming(queue: Queue, lists: Readonly<Record<string, string>>): string | undefined {
  const keys = queue.keys;
  const prefix = queuePrefix(queue);
  return Object.entries(lists).every(([field, suffix]) => keys[field] === prefix + suffix) ? prefix : undefined;
}

import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

const FIXTURE = join(__dirname, '..', 'fixtures', 'worker-process.ts');
const PUSHER = join(__dirname, '..', 'fixtures', 'push-process.ts');

export interface WorkerProcessOptions {
  redisUrl: string;
  name: string;
  mode?: 'record' | 'hang' | 'crash-on-poison' | 'block';
  options?: Record<string, unknown>;
  worker?: Record<string, unknown>;
  sliceDelayMs?: number;
  /** Mode 'block': how long the first slice blocks the event loop. */
  blockMs?: number;
}

/** Forks test/fixtures/worker-process.ts under tsx and resolves once its BullMQ worker is ready. */
export async function startWorkerProcess(o: WorkerProcessOptions): Promise<ChildProcess> {
  const child = fork(FIXTURE, [], {
    execArgv: ['--import', 'tsx'],
    env: {
      ...process.env,
      REDIS_URL: o.redisUrl,
      BBK_NAME: o.name,
      BBK_MODE: o.mode ?? 'record',
      BBK_OPTIONS: JSON.stringify(o.options ?? {}),
      BBK_WORKER: JSON.stringify(o.worker ?? {}),
      BBK_SLICE_DELAY_MS: String(o.sliceDelayMs ?? 0),
      BBK_BLOCK_MS: String(o.blockMs ?? 0),
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`worker process exited early with ${code}`)));
  });
  return child;
}

export async function stopProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  await exited;
}

export interface PushProcess {
  child: ChildProcess;
  /** Resolves with the exit code once the pusher has pushed everything (or was stopped) and closed. */
  done: Promise<number | null>;
  finished: () => boolean;
  /** Asks it to finish the pushes under way and stop. */
  stop: () => void;
}

/**
 * Forks test/fixtures/push-process.ts: up to `ids` single-id pushes over `keys` keys, ids named
 * `${prefix}-n`, `pauseMs` between two pushes of one of its callers. Every id whose push resolved
 * is added to `acked`.
 */
export function startPushProcess(
  o: { redisUrl: string; name: string; prefix: string; ids: number; keys: number; pauseMs: number },
  acked: Set<string>,
): PushProcess {
  const child = fork(PUSHER, [], {
    execArgv: ['--import', 'tsx'],
    env: {
      ...process.env,
      REDIS_URL: o.redisUrl,
      BBK_NAME: o.name,
      BBK_IDS: String(o.ids),
      BBK_KEYS: String(o.keys),
      BBK_PREFIX: o.prefix,
      BBK_PAUSE_MS: String(o.pauseMs),
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  child.on('message', (m: { acked?: string[] }) => m.acked?.forEach((id) => acked.add(id)));
  const done = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, done, finished: () => child.exitCode !== null, stop: () => void child.send('stop') };
}

import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

const FIXTURE = join(__dirname, '..', 'fixtures', 'worker-process.ts');

export interface WorkerProcessOptions {
  redisUrl: string;
  name: string;
  mode?: 'record' | 'hang' | 'crash-on-poison';
  options?: Record<string, unknown>;
  worker?: Record<string, unknown>;
  sliceDelayMs?: number;
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

import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { now, pollUntil, withTimeout } from '../lib/clock';
import type { FromWorker, LightSample, ToWorker, TracedSlice, WorkerSpec } from './protocol';

const CHILD = join(__dirname, 'child.ts');
const READY_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 10_000;
/** Workers start at one shared instant a little ahead, so two processes begin together. */
const START_LEAD_MS = 30;

type Final = Extract<FromWorker, { type: 'final' }>;

/** Every live worker process, so an interrupted bench never leaves one behind. */
const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

interface Tracked {
  child: ChildProcess;
  processed: number;
  lastAt: number;
  busyMs: number;
  final?: Final;
}

/** `count` worker processes of one system, started together and stopped together. */
export class WorkerPool {
  readonly light: LightSample[] = [];
  /** Every handler call of a traced key (WorkerSpec.tracePrefix), in arrival order. */
  readonly traced: TracedSlice[] = [];
  /** Ids of traced keys processed, a redelivered one counted again. */
  private tracedCount = 0;
  /** Distinct light ids processed: a redelivered id must not make a windowed run stop early. */
  private readonly lightIds = new Set<string>();
  private constructor(private readonly workers: Tracked[]) {}

  static async fork(count: number, spec: WorkerSpec): Promise<WorkerPool> {
    const extra = process.env.BENCH_CPU_PROF_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF_DIR}`] : [];
    const workers = Array.from({ length: count }, (): Tracked => {
      const child = fork(CHILD, [], {
        execArgv: ['--import', 'tsx', ...extra],
        env: { ...process.env, BENCH_WORKER_SPEC: JSON.stringify(spec) },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      live.add(child);
      child.once('exit', () => live.delete(child));
      return { child, processed: 0, lastAt: 0, busyMs: 0 };
    });
    const pool = new WorkerPool(workers);
    try {
      await withTimeout(Promise.all(workers.map((w) => pool.listen(w))), READY_TIMEOUT_MS, `${spec.system.id} worker start`);
    } catch (err) {
      pool.kill();
      throw err;
    }
    return pool;
  }

  /** Resolves on 'ready'; afterwards keeps the worker's counters and light samples current. */
  private listen(w: Tracked): Promise<void> {
    return new Promise((resolve, reject) => {
      w.child.once('exit', (code, signal) => {
        if (!w.final) reject(new Error(`worker process exited early (code ${code}, signal ${signal})`));
      });
      w.child.on('message', (message: FromWorker) => {
        if (message.type === 'ready') return resolve();
        w.processed = message.processed;
        w.lastAt = message.lastAt;
        w.busyMs = message.busyMs;
        this.light.push(...message.light);
        for (const slice of message.traced) {
          this.traced.push(slice);
          this.tracedCount += slice[1];
        }
        for (const [id] of message.light) this.lightIds.add(id);
        if (message.type === 'final') w.final = message;
      });
    });
  }

  /** Tells every worker to start at one instant; returns it (epoch ms). */
  start(): number {
    const at = now() + START_LEAD_MS;
    for (const w of this.workers) this.send(w, { type: 'start', at });
    return at;
  }

  get processed(): number {
    return this.workers.reduce((sum, w) => sum + w.processed, 0);
  }

  /** Time spent in handler calls so far, every slot of every worker summed (ms). */
  get busyMs(): number {
    return this.workers.reduce((sum, w) => sum + w.busyMs, 0);
  }

  /** Ids of traced keys processed so far. */
  get tracedIds(): number {
    return this.tracedCount;
  }

  /** When the last id so far was processed, by any worker. */
  get lastAt(): number {
    return Math.max(...this.workers.map((w) => w.lastAt));
  }

  /** False if `total` ids were not processed within `timeoutMs`. */
  waitProcessed(total: number, timeoutMs: number): Promise<boolean> {
    return pollUntil(() => this.processed >= total || this.workers.some((w) => w.child.exitCode !== null), timeoutMs, 5).then(
      (done) => done && this.processed >= total,
    );
  }

  /** False if `total` distinct light ids were not processed within `timeoutMs`. */
  waitLight(total: number, timeoutMs: number): Promise<boolean> {
    return pollUntil(() => this.lightIds.size >= total || this.workers.some((w) => w.child.exitCode !== null), timeoutMs, 5).then(
      (done) => done && this.lightIds.size >= total,
    );
  }

  /** False if `total` ids of traced keys were not processed within `timeoutMs`. */
  waitTraced(total: number, timeoutMs: number): Promise<boolean> {
    return pollUntil(() => this.tracedCount >= total || this.workers.some((w) => w.child.exitCode !== null), timeoutMs, 5).then(
      (done) => done && this.tracedCount >= total,
    );
  }

  /** Stops every worker and returns their final reports (figures first, then the consumer closes). */
  async stop(): Promise<Final[]> {
    for (const w of this.workers) this.send(w, { type: 'stop' });
    const finished = await pollUntil(() => this.workers.every((w) => w.final && w.child.exitCode !== null), STOP_TIMEOUT_MS, 10);
    if (!finished) {
      const stuck = this.workers.filter((w) => w.child.exitCode === null).length;
      if (stuck) console.warn(`${stuck} worker process(es) did not close within ${STOP_TIMEOUT_MS} ms; killed`);
    }
    this.kill();
    return this.workers.map((w) => {
      if (!w.final) throw new Error('a worker process exited without its final report');
      return w.final;
    });
  }

  private send(w: Tracked, message: ToWorker): void {
    if (w.child.connected) w.child.send(message);
  }

  private kill(): void {
    for (const w of this.workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
  }
}

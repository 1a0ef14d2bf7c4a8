import { now, seededRandom } from './clock';
import { summarize, type LatencySummary } from './stats';
import type { Producer } from '../systems/types';
import type { LightSample } from '../worker/protocol';

export const LIGHT_PREFIX = 'light-';

/** Small accounts that push a few ids at random moments while a backlog drains. */
export interface LightPlan {
  keys: number;
  idsPerPush: number;
  pushesPerKey: number;
  /** Pushes happen at random moments in [0, windowMs) after the workers start. */
  windowMs: number;
  seed: number;
}

export interface LightResult extends LatencySummary {
  pushed: number;
  /** Light ids not processed by the end of the run; their latency is unknown, so it is not in p50/p99. */
  missing: number;
}

/**
 * Runs the plan's pushes on schedule and turns the workers' processed-at samples into latency
 * from push to processed. Every system gets the same schedule (seeded), so only the system differs.
 */
export class LightPusher {
  private readonly pushedAt = new Map<string, number>();
  private readonly pending: Promise<void>[] = [];
  private timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly plan: LightPlan,
    private readonly producer: Producer,
  ) {}

  get total(): number {
    return this.plan.keys * this.plan.pushesPerKey * this.plan.idsPerPush;
  }

  /** Schedules every push; `done()` resolves when all have been sent. */
  start(): void {
    const random = seededRandom(this.plan.seed);
    for (let k = 0; k < this.plan.keys; k++) {
      const key = `${LIGHT_PREFIX}${String(k).padStart(2, '0')}`;
      for (let p = 0; p < this.plan.pushesPerKey; p++) {
        const delay = random() * this.plan.windowMs;
        this.pending.push(
          new Promise<void>((resolve, reject) => {
            this.timers.push(
              setTimeout(() => {
                const batch = `${key}:${p}`;
                const ids = Array.from({ length: this.plan.idsPerPush }, (_, i) => `${batch}:${i}`);
                this.pushedAt.set(batch, now());
                this.producer.push(key, ids).then(resolve, reject);
              }, delay),
            );
          }),
        );
      }
    }
  }

  async done(): Promise<void> {
    await Promise.all(this.pending);
  }

  cancel(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers = [];
  }

  /** Latency per light id, from the start of its push call to the end of the handler call that processed it. */
  result(samples: readonly LightSample[]): LightResult {
    const first = new Map<string, number>();
    for (const [id, at] of samples) if (!first.has(id)) first.set(id, at);
    const latencies: number[] = [];
    for (const [id, at] of first) {
      const pushedAt = this.pushedAt.get(id.slice(0, id.lastIndexOf(':')));
      if (pushedAt !== undefined) latencies.push(at - pushedAt);
    }
    return { ...summarize(latencies), pushed: this.total, missing: this.total - latencies.length };
  }
}

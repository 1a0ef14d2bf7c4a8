import { now, pollUntil, sleep } from './clock';

/** How often the pacer wakes up to send the calls that have come due since. */
export const TICK_MS = 2;

export interface PaceResult {
  /** Calls started. */
  issued: number;
  /** Calls that rejected (their ids never went in). */
  failed: Set<number>;
  /** When the pacer stopped starting calls (epoch ms). */
  endAt: number;
  /** How long each call that resolved took, ms, in no order. */
  callMs: number[];
  /** Resolves true once no call is in flight, false after `timeoutMs`. */
  settled(timeoutMs: number): Promise<boolean>;
}

/**
 * Starts `send(0)`, `send(1)`, ... at `ratePerSec` from `startAt` (epoch ms): every TICK_MS it starts
 * the calls due by then, without awaiting earlier ones, until `count` calls or `untilMs` after the
 * start. At most `maxInFlight` calls at once: past it the pacer falls behind and `issued` says so.
 */
export async function pace(
  plan: { ratePerSec: number; count: number; untilMs?: number; maxInFlight: number; startAt: number },
  send: (seq: number, startedAt: number) => Promise<void>,
): Promise<PaceResult> {
  let issued = 0;
  let inFlight = 0;
  const failed = new Set<number>();
  const callMs: number[] = [];
  await sleep(plan.startAt - now());
  for (;;) {
    const elapsed = now() - plan.startAt;
    if (issued >= plan.count || (plan.untilMs !== undefined && elapsed >= plan.untilMs)) break;
    const due = Math.min(plan.count, Math.floor((elapsed * plan.ratePerSec) / 1000) + 1);
    while (issued < due && inFlight < plan.maxInFlight) {
      const seq = issued++;
      const at = now();
      inFlight++;
      send(seq, at).then(
        () => {
          inFlight--;
          callMs.push(now() - at);
        },
        () => {
          inFlight--;
          failed.add(seq);
        },
      );
    }
    await sleep(TICK_MS);
  }
  return { issued, failed, endAt: now(), callMs, settled: (timeoutMs) => pollUntil(() => inFlight === 0, timeoutMs, 5) };
}

/**
 * One noisy account pushes 100,000 ids, then 20 small accounts push a few each. Every key has
 * its own job that yields after MAX_RUNTIME_MS, so the small accounts finish long before the
 * noisy one instead of queueing behind its 1,000 slices.
 *
 *   npm run demo                          (starts a throwaway redis-server, and stops it)
 *   REDIS_URL=redis://host:6379 npm run demo
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { batchByKey } from 'batch-by-key';
import { RedisNotInstalledError, startRedis, type LocalRedis } from '../tools/redis-server';

const NOISY = 'noisy';
const NOISY_IDS = 100_000;
const PUSH_CALL = 1_000;
const SMALL_ACCOUNTS = 20;
const SLICE_SIZE = 100;
const SLICE_WORK_MS = 15;
const MAX_RUNTIME_MS = 200;
// One worker slot is the hard case: the noisy key could hold it for its whole backlog, and only
// the time box (MAX_RUNTIME_MS) lets the small accounts in between its runs.
const CONCURRENCY = 1;

const smallKeys = Array.from({ length: SMALL_ACCOUNTS }, (_, i) => `small-${String(i + 1).padStart(2, '0')}`);
const expected = new Map<string, number>([[NOISY, NOISY_IDS], ...smallKeys.map((k, i): [string, number] => [k, 20 + ((i * 7) % 31)])]);
const processed = new Map<string, number>();
const finishedAt = new Map<string, number>();
let noisyDoneWhenLastSmallFinished = 0;
let t0 = 0;
const elapsed = () => Date.now() - t0;
const fmt = (n: number) => n.toLocaleString('en-US');
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/**
 * Runs `run` against REDIS_URL, or, when it is unset or empty (`REDIS_URL= npm run demo`), against
 * a throwaway redis-server, which it stops whatever `run` does: a demo that fails must not leave a
 * server running.
 */
export async function withDemoRedis<T>(run: (url: string) => Promise<T>, env: NodeJS.ProcessEnv = process.env): Promise<T> {
  // `||`, not `??`: an empty REDIS_URL is no URL, and the batcher would refuse it.
  const given = env.REDIS_URL || undefined;
  if (given) return run(given);
  const localRedis: LocalRedis = await startRedis();
  try {
    return await run(localRedis.url);
  } finally {
    await localRedis.stop();
  }
}

async function main(url: string): Promise<void> {
  const X = batchByKey({
    // A fresh name per run, so a shared REDIS_URL never mixes runs.
    name: `demo-${Date.now()}`,
    connection: url,
    sliceSize: SLICE_SIZE,
    maxRuntimeMs: MAX_RUNTIME_MS,
    logger: { warn: console.warn, error: console.error },
    async eachIteration(ids, ctx) {
      await sleep(SLICE_WORK_MS);
      const count = (processed.get(ctx.key) ?? 0) + ids.length;
      processed.set(ctx.key, count);
      if (count >= expected.get(ctx.key)! && !finishedAt.has(ctx.key)) {
        finishedAt.set(ctx.key, elapsed());
        if (ctx.key !== NOISY && smallKeys.every((k) => finishedAt.has(k))) {
          noisyDoneWhenLastSmallFinished = processed.get(NOISY) ?? 0;
        }
      }
    },
  });
  // Closed whatever happens below (X.close() closes its worker too): the server can stop after.
  try {
    const worker = X.createWorker({ concurrency: CONCURRENCY });
    await worker.waitUntilReady();

    t0 = Date.now();
    const stopShowing = showProgress();
    let showing = true;
    // Once: the summary follows the last progress line, and a failure stops the timer too.
    const stopProgress = () => {
      if (showing) stopShowing();
      showing = false;
    };
    try {
      for (let i = 0; i < NOISY_IDS; i += PUSH_CALL) {
        await X.performBatchLater(
          Array.from({ length: PUSH_CALL }, (_, j) => i + j),
          { key: NOISY },
        );
      }
      // The small accounts arrive after the noisy backlog is already queued and being worked on.
      await sleep(300);
      const smallPushedAt = elapsed();
      await Promise.all(
        smallKeys.map((key) =>
          X.performBatchLater(
            Array.from({ length: expected.get(key)! }, (_, j) => `${key}-${j}`),
            { key },
          ),
        ),
      );

      while (finishedAt.size < expected.size) await sleep(50);
      stopProgress();
      const left = await X.backlog(NOISY);
      printSummary(smallPushedAt, left.pending + left.inFlight);
    } finally {
      stopProgress();
    }
  } finally {
    await X.close();
  }
}

function noisyBar(width: number): string {
  const share = (processed.get(NOISY) ?? 0) / NOISY_IDS;
  const full = Math.round(share * width);
  return `[${'#'.repeat(full)}${'.'.repeat(width - full)}] ${String(Math.floor(share * 100)).padStart(3)}%`;
}

function lastSmallMs(): number {
  return Math.max(...smallKeys.map((k) => finishedAt.get(k) ?? 0));
}

function smallDone(): number {
  return smallKeys.filter((k) => finishedAt.has(k)).length;
}

/** Redraws a few lines in place on a terminal; prints one plain line every 1.5 s elsewhere (CI logs, pipes). */
function showProgress(): () => void {
  if (process.stdout.isTTY) {
    let drawn = 0;
    const draw = () => {
      const lines = [
        `  ${secs(elapsed()).padStart(7)}  noisy ${noisyBar(30)}  ${fmt(processed.get(NOISY) ?? 0)}/${fmt(NOISY_IDS)}`,
        `           small accounts done: ` +
          `${smallDone()}/${SMALL_ACCOUNTS}${smallDone() === SMALL_ACCOUNTS ? ` (all by ${secs(lastSmallMs())})` : ''}`,
      ];
      process.stdout.write((drawn ? `\x1b[${drawn}A` : '') + lines.map((l) => `\x1b[2K${l}\n`).join(''));
      drawn = lines.length;
    };
    const timer = setInterval(draw, 200);
    return () => {
      clearInterval(timer);
      draw();
    };
  }
  const line = () =>
    console.log(`[${secs(elapsed()).padStart(6)}] noisy ${noisyBar(20)} | small accounts done ${smallDone()}/${SMALL_ACCOUNTS}`);
  const timer = setInterval(line, 1_500);
  return () => {
    clearInterval(timer);
    line();
  };
}

function printSummary(smallPushedAt: number, noisyLeft: number): void {
  const noisyMs = finishedAt.get(NOISY)!;
  const extra = [...expected].reduce((sum, [k, n]) => sum + (processed.get(k)! - n), 0);
  console.log(`\nSmall accounts (pushed at ${fmt(smallPushedAt)} ms), finished at:`);
  for (let i = 0; i < smallKeys.length; i += 5) {
    console.log(
      '  ' +
        smallKeys
          .slice(i, i + 5)
          .map((k) => `${k} ${fmt(finishedAt.get(k)!).padStart(6)} ms`)
          .join('   '),
    );
  }
  console.log(`Noisy account (${fmt(NOISY_IDS)} ids), finished at: ${fmt(noisyMs)} ms`);
  console.log(`Ids left in Redis: ${noisyLeft}; processed more than once: ${extra}`);
  console.log(
    `\nall ${SMALL_ACCOUNTS} small accounts finished in ${secs(lastSmallMs())} while the noisy account took ${secs(noisyMs)} ` +
      `(${Math.round((noisyDoneWhenLastSmallFinished / NOISY_IDS) * 100)}% done when the last small one finished)`,
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  withDemoRedis(main).then(
    () => undefined,
    (err: unknown) => {
      console.error(err instanceof RedisNotInstalledError ? err.message : err);
      process.exit(1);
    },
  );
}

/**
 * A bulk import that reports per-row progress and keeps bad rows aside: run it with
 * `npx tsx examples/bulk-import.ts`: against REDIS_URL, or, when it is unset, a throwaway
 * redis-server from your PATH (see run-main.ts).
 */
import { batchByKey, PermanentError, type IterationContext } from 'batch-by-key';
import { runMain } from './run-main';

/**
 * The slice starting at each 5,000th row hits a flaky dependency once: a throw, so the whole slice
 * runs again after its backoff. Rows whose number ends in 13 fail validation, each for its own
 * reason: reported one by one (`ctx.fail`), so the slice's other rows are imported and only those
 * go to the dead letters, at once (a PermanentError; any other error would retry them).
 */
async function importRows(rows: string[], ctx: IterationContext): Promise<void> {
  if (ctx.attempt === 1 && Number(rows[0]) % 5000 === 0) throw new Error('search index timed out');
  for (const row of rows) {
    if (row.endsWith('13')) ctx.fail(row, new PermanentError(`row ${row} failed validation`));
  }
}

export const Importer = batchByKey({
  name: 'bulk-import',
  connection: process.env.REDIS_URL ?? 'redis://localhost:6379',
  backoff: { type: 'fixed', delayMs: 200 },
  eachIteration: importRows,
  // Every slice, logged with its outcome: the place for tracing or error reporting.
  around: async (slice, next) => {
    try {
      await next();
    } catch (err) {
      console.warn(`slice of ${slice.ids.length} rows for ${slice.key} failed (attempt ${slice.attempt}): ${(err as Error).message}`);
      throw err;
    }
  },
});

export async function main(rowCount = 20_000): Promise<void> {
  const rows = Array.from({ length: rowCount }, (_, i) => String(i));
  const { ticket } = await Importer.performBatchLater(rows, { key: 'customer-7', track: true });
  const worker = Importer.createWorker();
  const progress = await Importer.waitFor(ticket, { timeoutMs: 120_000 });
  console.log(
    `imported ${progress.done} of ${progress.total} rows; ${progress.failed} rejected, e.g. ${JSON.stringify(progress.errors[0])}`,
  );
  const { letters } = await Importer.deadLetters.list({ key: 'customer-7', limit: 3 });
  console.log('dead letters:', letters.map((l) => `${l.id}: ${l.error.message}`).join(', '));
  // After fixing the validation, `await Importer.deadLetters.requeue({ key: 'customer-7' })` runs them again.
  await worker.close();
  await Importer.deadLetters.purge({ key: 'customer-7' });
  await Importer.close();
}

runMain(import.meta.url, main);

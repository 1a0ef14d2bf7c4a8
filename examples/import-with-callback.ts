/**
 * An import read page by page into an open ticket, with a callback when every row is done: run it
 * with `npx tsx examples/import-with-callback.ts`: against REDIS_URL, or, when it is unset, a
 * throwaway redis-server from your PATH (see run-main.ts).
 * The callback is a BullMQ job added exactly once, whatever worker settles the last row, and run
 * at least once: it is keyed by the ticket, so sending the summary twice would be caught there.
 */
import { batchByKey, PermanentError, type TicketOutcome } from 'batch-by-key';
import { runMain } from './run-main';

/** Rows are { sku, qty }; a negative quantity is a bad row. */
type Row = { sku: string; qty: number };

const summaries = new Map<string, TicketOutcome>();

export const Import = batchByKey<Row>({
  name: 'import-with-callback',
  connection: process.env.REDIS_URL ?? 'redis://localhost:6379',
  sliceSize: 50,
  async eachIteration(rowIds, ctx) {
    const bad = rowIds.filter((id) => (ctx.data(id)?.qty ?? 0) < 0);
    if (bad.length > 0) throw new PermanentError('negative quantity', { ids: bad });
  },
  onTicketSettled(outcome, ticket) {
    // Idempotent by the ticket: a retried callback finds its summary already sent.
    if (summaries.has(ticket)) return;
    summaries.set(ticket, outcome);
    console.log(
      `import ${outcome.success ? 'succeeded' : 'finished with errors'}: ${outcome.done} rows imported, ${outcome.failed} rejected`,
    );
  },
});

/** Reads `pages` pages of 100 rows into one open ticket, seals it, and waits for the callback. */
export async function main(pages = 5): Promise<TicketOutcome> {
  const worker = Import.createWorker();
  const ticket = await Import.openTicket('customer-42');
  for (let page = 0; page < pages; page++) {
    const rows = Array.from({ length: 100 }, (_, i) => {
      const n = page * 100 + i;
      return { id: `row-${n}`, data: { sku: `sku-${n % 17}`, qty: n % 97 === 0 ? -1 : 1 } };
    });
    await Import.performBatchLater(rows, { ticket });
  }
  // No count was needed up front: the ticket settles once sealed and every row is done or dead.
  await Import.sealTicket(ticket);
  while (!summaries.has(ticket)) await new Promise((r) => setTimeout(r, 50));
  await worker.close();
  await Import.deadLetters.purge({ key: 'customer-42' });
  await Import.close();
  return summaries.get(ticket)!;
}

runMain(import.meta.url, main);

/**
 * Shipping each account's events to a warehouse that wants big inserts, from a trickle of
 * single-event pushes: wait to fill (`minSliceSize`, `maxWaitMs`). Run it with
 * `npx tsx examples/event-sink.ts`: against REDIS_URL, or, when it is unset, a throwaway
 * redis-server from your PATH (see run-main.ts). The warehouse here is an array.
 */
import { batchByKey } from 'batch-by-key';
import { runMain } from './run-main';

/** One insert per slice: the account, its events, and when it ran. */
export const inserts: { account: string; events: string[]; at: number }[] = [];

export const EventSink = batchByKey({
  name: 'event-sink',
  connection: process.env.REDIS_URL ?? 'redis://localhost:6379',
  sliceSize: 100,
  // An account's run starts once 50 events wait, or once its oldest has waited half a second: a
  // busy account inserts in batches of 50 to 100, a quiet one within about 500 ms.
  minSliceSize: 50,
  maxWaitMs: 500,
  eachIteration(events, ctx) {
    inserts.push({ account: ctx.key, events: [...events], at: Date.now() });
  },
});

export async function main(): Promise<typeof inserts> {
  const worker = EventSink.createWorker({ concurrency: 4 });
  const started = Date.now();
  // A busy account, one event per push (as concurrent requests send them), and a quiet one. Pushes
  // from one client reach Redis in the order they were made, so each account's events keep theirs.
  await Promise.all(Array.from({ length: 120 }, (_, i) => EventSink.performBatchLater([`busy-e${i}`], { key: 'busy' })));
  await Promise.all(Array.from({ length: 3 }, (_, i) => EventSink.performBatchLater([`quiet-e${i}`], { key: 'quiet' })));
  const count = (account: string) => inserts.filter((s) => s.account === account).reduce((n, s) => n + s.events.length, 0);
  while (count('busy') < 120 || count('quiet') < 3) await new Promise((r) => setTimeout(r, 20));
  for (const account of ['busy', 'quiet']) {
    const mine = inserts.filter((s) => s.account === account);
    console.log(
      `${account}: ${count(account)} events in ${mine.length} insert(s) of ${mine.map((s) => s.events.length).join(', ')}, ` +
        `the last ${((mine.at(-1)!.at - started) / 1000).toFixed(1)} s after the first push`,
    );
  }
  await worker.close();
  await EventSink.close();
  return inserts;
}

runMain(import.meta.url, main);

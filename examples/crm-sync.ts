/**
 * Syncing accounts to a CRM that limits each account, and our one API token across every
 * account, and answers 429 with Retry-After: run it
 * with `npx tsx examples/crm-sync.ts`: against REDIS_URL, or, when it is unset, a throwaway
 * redis-server from your PATH (see run-main.ts). The CRM here is a stand-in HTTP server in the
 * same process.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { batchByKey, parseRetryAfter } from 'batch-by-key';
import { runMain } from './run-main';

/**
 * A CRM that takes 20 records a second per account, and 50 a second per API token (ours, for
 * every account), and answers 429 past either, saying which (`X-RateLimit-Scope`).
 */
export function fakeCrm(perSecond = 20, perToken = 50): { server: Server; received: Map<string, string[]>; throttled: () => number } {
  const received = new Map<string, string[]>();
  const recent = new Map<string, number[]>();
  let tokenRecent: number[] = [];
  let throttled = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const account = decodeURIComponent((req.url ?? '').split('/').pop() ?? '');
      const records = JSON.parse(body) as string[];
      const now = Date.now();
      const window = (recent.get(account) ?? []).filter((at) => at > now - 1000);
      tokenRecent = tokenRecent.filter((at) => at > now - 1000);
      const scope = tokenRecent.length + records.length > perToken ? 'token' : window.length + records.length > perSecond ? 'account' : '';
      if (scope) {
        throttled++;
        res.writeHead(429, { 'Retry-After': '1', 'X-RateLimit-Scope': scope }).end();
        return;
      }
      recent.set(account, [...window, ...records.map(() => now)]);
      tokenRecent.push(...records.map(() => now));
      received.set(account, [...(received.get(account) ?? []), ...records]);
      res.writeHead(204).end();
    });
  });
  return { server, received, throttled: () => throttled };
}

let crmUrl = process.env.CRM_URL ?? 'http://127.0.0.1:8080';

export const CrmSync = batchByKey({
  name: 'crm-sync',
  connection: process.env.REDIS_URL ?? 'redis://localhost:6379',
  sliceSize: 10,
  // Our side of the CRM's limit, across every worker process; 'enterprise' accounts have their own deal.
  rateLimit: (account) => (account.startsWith('enterprise-') ? { max: 200, durationMs: 1000 } : { max: 20, durationMs: 1000 }),
  // And the token's limit, shared by every account and every worker process: the stricter of the two wins.
  globalRateLimit: { max: 50, durationMs: 1000 },
  async eachIteration(records, ctx) {
    const res = await fetch(`${crmUrl}/accounts/${encodeURIComponent(ctx.key)}`, {
      method: 'POST',
      body: JSON.stringify(records),
      signal: ctx.signal,
    });
    // The CRM knows better (another client shares the quota): wait as long as it says, every
    // account when it is the token that is spent.
    if (res.status === 429) {
      const scope = res.headers.get('x-ratelimit-scope') === 'token' ? 'batcher' : 'key';
      ctx.retryAfter(parseRetryAfter(res.headers.get('retry-after')) ?? 1000, { scope });
    }
    if (!res.ok) throw new Error(`CRM answered ${res.status}`);
  },
});

export async function main(perAccount = 60): Promise<Map<string, string[]>> {
  const crm = fakeCrm();
  await new Promise<void>((resolve) => crm.server.listen(0, '127.0.0.1', resolve));
  crmUrl = `http://127.0.0.1:${(crm.server.address() as AddressInfo).port}`;
  const accounts = ['acct-1', 'acct-2', 'acct-3'];
  for (const account of accounts)
    await CrmSync.performBatchLater(
      Array.from({ length: perAccount }, (_, i) => `${account}-r${i}`),
      { key: account },
    );
  const started = Date.now();
  const worker = CrmSync.createWorker({ concurrency: 2 });
  while ([...crm.received.values()].reduce((n, r) => n + r.length, 0) < accounts.length * perAccount)
    await new Promise((r) => setTimeout(r, 50));
  console.log(
    `synced ${accounts.length * perAccount} records in ${((Date.now() - started) / 1000).toFixed(1)} s at 20/s per account and 50/s ` +
      `for the token; the CRM ` +
      `throttled ${crm.throttled()} requests`,
  );
  await worker.close();
  await CrmSync.close();
  await new Promise((resolve) => crm.server.close(resolve));
  return crm.received;
}

runMain(import.meta.url, main);

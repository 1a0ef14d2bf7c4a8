import { mkdirSync } from 'node:fs';
import express from 'express';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dashboard, InvalidOptionError, PermanentError, type Batcher, type History, type KeyStats, type Stats } from '../src';
import { encodeSample } from '../src/ops/history';
import { defineScripts, runScript } from '../src/storage/scripts';
import { redisNow } from '../src/ops/stats';
import { Gate } from './helpers/gate';
import { serveLocally } from './helpers/http';
import { keyspaceOf, range, redisClient, testBatcher, uniqueName, waitFor } from './helpers/redis';

const XSS_KEY = '<img src=x onerror=alert(1)>';

let browser: Browser;
beforeAll(async () => {
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
});
afterAll(async () => {
  await browser?.close();
});

/** A live workload: two keys held in flight with a backlog, and a dead letter whose key is markup. */
async function workload(): Promise<{ b: Batcher; gate: Gate; poison: Set<string> }> {
  const gate = new Gate();
  const poison = new Set(['boom']);
  const b = testBatcher({
    sliceSize: 2,
    async eachIteration(ids, ctx) {
      if (ids.some((id) => poison.has(id))) throw new PermanentError('bad <b>payload</b>', { ids: ids.filter((id) => poison.has(id)) });
      // Until the gate opens, or the worker closes at the end of the test.
      await Promise.race([gate.opened, new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }))]);
    },
  });
  await b.performBatchLater(['boom'], { key: XSS_KEY });
  await b.performBatchLater(['1', '2', '3', '4', '5'], { key: 'busy' });
  await b.performBatchLater(['a', 'b', 'c'], { key: 'backlog-key' });
  b.createWorker({ concurrency: 3 });
  await waitFor(async () => (await b.deadLetters.count()) === 1 && (await b.stats()).inFlight === 4, {
    what: 'a dead letter and two busy keys',
  });
  return { b, gate, poison };
}

/** The dashboard of `b` (not read-only) served locally, a browser page, and the dialogs it accepted. */
async function openDashboard(b: Parameters<typeof dashboard>[0]['batchers'][number]) {
  const url = await serveLocally(dashboard({ batchers: [b], readOnly: false }));
  const page = await browser.newPage();
  const dialogs: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.accept();
  });
  return { url, page, dialogs };
}

describe('dashboard in a browser', () => {
  it('lists the keys of a live workload, escapes user data, and requeues a dead letter', async () => {
    const { b, gate, poison } = await workload();
    const { url, page, dialogs } = await openDashboard(b);
    await page.goto(`${url}/`);
    const section = page.locator(`section[data-batcher="${b.name}"]`);
    await expect(section.locator('.key', { hasText: 'busy' }).first().isVisible()).resolves.toBe(true);
    const text = await section.innerText();
    expect(text).toContain('backlog-key');
    expect(text).toMatch(/busy\t3\t2\t0\t/);
    expect(text).toContain(XSS_KEY); // shown as text, not markup
    expect(text).toContain('PermanentError: bad <b>payload</b>');
    expect(await page.locator('main img, main b').count()).toBe(0);
    mkdirSync('test-artifacts', { recursive: true });
    await page.screenshot({ path: 'test-artifacts/dashboard.png', fullPage: true });

    poison.clear();
    await section.locator('table.dead form[action$="/actions/requeue"] button').first().click();
    await page.waitForURL(`${url}/`);
    await waitFor(async () => (await b.deadLetters.count()) === 0, { what: 'the letter requeued' });
    expect(await section.locator('table.dead').count()).toBe(0);
    expect(dialogs).toEqual([]); // no alert from the key's markup
    gate.open();
    await waitFor(async () => (await b.stats()).keys === 0, { what: 'drained' });
  });

  it("a key's page, linked from the keys tables: its running slice and its pending ids with their data, escaped, read-only, in pages", async () => {
    const gate = new Gate();
    const b = testBatcher({
      sliceSize: 2,
      async eachIteration(_ids, ctx) {
        await Promise.race([gate.opened, new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }))]);
      },
    });
    await b.performBatchLater(['r1', 'r2', { id: '<i>p1</i>', data: { html: '<b>x</b>' } }, ...range(150, 'p')], { key: XSS_KEY });
    b.createWorker();
    await waitFor(async () => (await b.inFlight(XSS_KEY)).running.length === 1, { what: 'the slice in flight' });
    const { url, page, dialogs } = await openDashboard(b);
    try {
      await page.goto(`${url}/`);
      await page.locator('table a', { hasText: XSS_KEY }).first().click();
      await page.waitForSelector('table.pending');
      const section = page.locator('section');
      expect(await section.locator('h2').innerText()).toContain(XSS_KEY);
      expect(await section.locator('table.running').innerText()).toMatch(/0\t1\tnormal\tr1 r2/);
      const rows = await section.locator('table.pending tr').allInnerTexts();
      expect(rows[1]).toBe('<i>p1</i>\tnormal\t\t[{"html":"<b>x</b>"}]');
      expect(rows).toHaveLength(101);
      expect(await page.locator('main img, main b, main i, form, button').count()).toBe(0);
      await page.click('a.next');
      await page.waitForSelector('table.pending');
      const rest = await page.locator('table.pending tr').allInnerTexts();
      expect(rest.slice(1).map((r) => r.split('\t')[0])).toEqual(range(150, 'p').slice(99));
      expect(await page.locator('a.next').count()).toBe(0);
      expect(dialogs).toEqual([]);
    } finally {
      await page.close();
      gate.open();
    }
    const key64 = Buffer.from(XSS_KEY).toString('base64url');
    expect((await fetch(`${url}/keys?batcher=${b.name}&key64=${key64}&level=low`)).status).toBe(400);
    expect((await fetch(`${url}/keys?batcher=${b.name}&key64=${key64}&limit=5000`)).status).toBe(400);
    expect((await fetch(`${url}/keys?batcher=nope&key64=${key64}`)).status).toBe(404);
    expect((await fetch(`${url}/keys?batcher=${b.name}`)).status).toBe(400);
    expect((await fetch(`${url}/keys?batcher=${b.name}&key64=${key64}`, { method: 'POST' })).status).toBe(405);
  });

  it('pauses a key from its form and resumes it from the paused keys table', async () => {
    const rec: string[] = [];
    const b = testBatcher({ eachIteration: (ids) => void rec.push(...ids) });
    const url = await serveLocally(dashboard({ batchers: [b], readOnly: false }));
    const page = await browser.newPage();
    try {
      await page.goto(`${url}/`);
      await page.fill('form.pause input[name="key"]', XSS_KEY);
      await page.click('form.pause button');
      await page.waitForSelector('table.paused');
      expect(await page.textContent('table.paused')).toContain(XSS_KEY);
      expect(await b.paused()).toEqual([{ key: XSS_KEY }]);
      await b.performBatchLater(['1', '2'], { key: XSS_KEY });
      b.createWorker();
      await page.click('table.paused button');
      await page.waitForSelector('text=Paused keys: none');
      await waitFor(() => rec.length === 2, { what: 'the resumed key' });
      expect(await b.paused()).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('shows the batcher-wide limits and changes them from its form; bad input is a 400', async () => {
    const b = testBatcher({ globalConcurrency: 3, eachIteration: () => {} });
    await b.performBatchLater(['1'], { key: 'a' });
    const url = await serveLocally(dashboard({ batchers: [b], readOnly: false }));
    const page = await browser.newPage();
    try {
      await page.goto(`${url}/`);
      expect(await page.textContent('p.limits')).toBe(
        'Limits: rate unlimited, concurrency 0/3 running, 0 waiting, waited 0 ms over 0 waits',
      );
      await page.fill('form.limits input[name="rate"]', '600/60000');
      await page.fill('form.limits input[name="concurrency"]', 'off');
      await page.click('form.limits button');
      await page.waitForSelector('text=concurrency unlimited');
      expect(await page.textContent('p.limits')).toMatch(/^Limits: rate 0\/600 ids per 1\.0 min, concurrency unlimited/);
      expect((await b.stats()).limits).toMatchObject({ rate: { max: 600, durationMs: 60_000 } });
      await page.fill('form.limits input[name="concurrency"]', '0');
      const [reply] = await Promise.all([
        page.waitForResponse((r) => r.url().endsWith('/actions/limits')),
        page.click('form.limits button'),
      ]);
      expect(reply.status()).toBe(400);
      expect((await b.stats()).limits).not.toHaveProperty('concurrency');
    } finally {
      await page.close();
    }
  });

  it('limits posted as JSON: a number for concurrency is taken, as the docs allow; any other value is a 400 that says why', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await b.performBatchLater(['1'], { key: 'a' });
    const url = await serveLocally(dashboard({ batchers: [b], readOnly: false }));
    const token = /name="token" value="([0-9a-f]+)"/.exec(await (await fetch(`${url}/`)).text())?.[1];
    const post = (fields: Record<string, unknown>) =>
      fetch(`${url}/actions/limits`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': token! },
        body: JSON.stringify({ batcher: b.name, ...fields }),
      });
    const taken = await post({ concurrency: 5 });
    expect(taken.status).toBe(200);
    expect((await b.stats()).limits.concurrency).toEqual({ limit: 5, running: 0 });
    for (const fields of [
      { concurrency: 0 },
      {},
      { concurrency: [3] },
      { concurrency: null },
      { rate: { max: 5, durationMs: 1000 } },
      { rate: 5 },
    ]) {
      const refused = await post(fields);
      expect({ fields, status: refused.status }).toEqual({ fields, status: 400 });
      expect(await refused.text()).toMatch(/concurrency|rate/);
    }
    expect((await b.stats()).limits).toMatchObject({ concurrency: { limit: 5 } });
    expect((await b.stats()).limits).not.toHaveProperty('rate');
  });

  it('read-only: no buttons, and a POST is refused with 403', async () => {
    const { b } = await workload();
    const url = await serveLocally(dashboard({ batchers: [b] }));
    const page = await browser.newPage();
    await page.goto(`${url}/`);
    expect(await page.locator('button').count()).toBe(0);
    expect(await page.locator('text=read-only').count()).toBe(1);
    const status = await page.evaluate(
      async () => (await fetch('actions/requeue', { method: 'POST', body: new URLSearchParams({ batcher: 'x' }) })).status,
    );
    expect(status).toBe(403);
    expect(await b.deadLetters.count()).toBe(1);
  });
});

describe('dashboard over HTTP', () => {
  it("GET /api/v1/stats returns every batcher's stats as JSON", async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const c = testBatcher({ eachIteration: () => {} });
    await b.performBatchLater(['1', '2'], { key: 'k' });
    const url = await serveLocally(dashboard({ batchers: [b, c] }));
    const res = await fetch(`${url}/api/v1/stats`);
    expect(res.headers.get('content-type')).toContain('application/json');
    const body = (await res.json()) as { batchers: { name: string; pending: number }[] };
    expect(body.batchers.map((s) => [s.name, s.pending])).toEqual([
      [b.name, 2],
      [c.name, 0],
    ]);
    expect((await fetch(`${url}/api/v1/stats`, { method: 'DELETE' })).status).toBe(405);
    expect((await fetch(`${url}/nope`)).status).toBe(404);
  });

  it('the page’s buttons act on keys and ids holding CR, LF or NUL, each on its own key (in Chromium)', async () => {
    const { b } = await workload();
    const keys = ['twin\nkey', 'twin\r\nkey', 'nul\u0000key'];
    for (const key of keys) await b.pause(key);
    const url = await serveLocally(dashboard({ batchers: [b], readOnly: false }));
    const page = await browser.newPage();
    try {
      for (const key of keys) {
        await page.goto(`${url}/`);
        const value = Buffer.from(key, 'utf8').toString('base64url');
        await page.click(`form:has(input[name="key64"][value="${value}"]) button.resume`);
        await page.waitForURL(`${url}/`);
        const left = (await b.paused()).map((p) => p.key);
        expect(left).not.toContain(key);
        expect(left.length).toBe(keys.length - keys.indexOf(key) - 1);
      }
    } finally {
      await page.close();
    }
  });

  it('many paused keys: paused() reads them all in pages; the page shows the first 100 and says how many more', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const keys = range(2_500, 'p-');
    for (let i = 0; i < keys.length; i += 250) await Promise.all(keys.slice(i, i + 250).map((key) => b.pause(key)));
    const listed = await b.paused();
    expect(listed.map((p) => p.key).sort()).toEqual([...keys].sort());
    const url = await serveLocally(dashboard({ batchers: [b], readOnly: false }));
    const html = await (await fetch(`${url}/`)).text();
    expect(html.match(/name="key64" value="/g)?.length).toBe(100);
    expect(html).toContain('and 2400 more, not shown');
  });

  it('refuses actions that are cross-site or lack the token', async () => {
    const { b } = await workload();
    const url = await serveLocally(dashboard({ batchers: [b], readOnly: false }));
    const token = /name="token" value="([0-9a-f]+)"/.exec(await (await fetch(`${url}/`)).text())?.[1];
    expect(token).toBeDefined();
    const post = (headers: Record<string, string>, fields: Record<string, string>) =>
      fetch(`${url}/actions/purge`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(fields),
        redirect: 'manual',
      });
    expect((await post({ origin: 'https://evil.example' }, { batcher: b.name, token: token! })).status).toBe(403);
    expect((await post({ 'sec-fetch-site': 'cross-site' }, { batcher: b.name, token: token! })).status).toBe(403);
    expect((await post({}, { batcher: b.name, token: 'f'.repeat(48) })).status).toBe(403);
    expect((await post({}, { batcher: 'other', token: token! })).status).toBe(400);
    expect(await b.deadLetters.count()).toBe(1);
    // Same host, another scheme or port: another origin.
    const host = new URL(url).host;
    expect((await post({ origin: `https://${host}` }, { batcher: b.name, token: token! })).status).toBe(403);
    expect((await post({ origin: `http://${new URL(url).hostname}:1` }, { batcher: b.name, token: token! })).status).toBe(403);
    // A token of as many characters but more bytes, and a JSON body that is no object: refused, never a 500.
    expect((await post({}, { batcher: b.name, token: 'é'.repeat(token!.length) })).status).toBe(403);
    const json = (body: string) =>
      fetch(`${url}/actions/purge`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': token! }, body });
    expect((await json('null')).status).toBe(400);
    expect((await json('[1]')).status).toBe(400);
    expect(await b.deadLetters.count()).toBe(1);
    const ok = await post({ origin: url, 'sec-fetch-site': 'same-origin' }, { batcher: b.name, token: token! });
    expect(await ok.json()).toEqual({ purged: 1 });
    expect(await b.deadLetters.count()).toBe(0);
  });

  it('the drop action drops a key behind the token and answers the counts; refused without the token or a key', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await b.performBatchLater(range(3), { key: 'an account' });
    const url = await serveLocally(dashboard({ batchers: [b], readOnly: false }));
    const token = /name="token" value="([0-9a-f]+)"/.exec(await (await fetch(`${url}/`)).text())![1]!;
    const drop = (fields: Record<string, unknown>, csrf = token) =>
      fetch(`${url}/actions/drop`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
        body: JSON.stringify({ batcher: b.name, ...fields }),
      });
    expect((await drop({ key: 'an account' }, 'f'.repeat(48))).status).toBe(403);
    expect((await drop({})).status).toBe(400);
    expect((await drop({ key: 'an account', deadLetters: 'maybe' })).status).toBe(400);
    expect(await b.backlog('an account')).toMatchObject({ pending: 3 });
    const ok = await drop({ key: 'an account', deadLetters: true });
    expect(await ok.json()).toEqual({
      key: 'an account',
      dropped: { pending: 3, inFlight: 0, retrying: 0, tickets: 0, deadLetters: 0 },
    });
    expect(await b.backlog('an account')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
  });

  it('a proxy that terminates TLS says so with X-Forwarded-Proto: its https origin passes; http does not', async () => {
    const { b } = await workload();
    const url = await serveLocally(dashboard({ batchers: [b], readOnly: false }));
    const token = /name="token" value="([0-9a-f]+)"/.exec(await (await fetch(`${url}/`)).text())![1]!;
    const host = new URL(url).host;
    const post = (origin: string) =>
      fetch(`${url}/actions/purge`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin, 'x-forwarded-proto': 'https' },
        body: new URLSearchParams({ batcher: b.name, token }),
      });
    expect((await post(`http://${host}`)).status).toBe(403);
    expect(await (await post(`https://${host}`)).json()).toEqual({ purged: 1 });
  });

  it('behind a proxy that rewrites Host, actions from a configured origin pass; an invalid key in an action is a 400', async () => {
    const { b } = await workload();
    const page = async (url: string) => /name="token" value="([0-9a-f]+)"/.exec(await (await fetch(`${url}/`)).text())?.[1] as string;
    const post = (url: string, token: string, fields: Record<string, string> = {}) =>
      fetch(`${url}/actions/purge`, {
        method: 'POST',
        // The browser is on the proxy's origin; the app sees the proxy's upstream Host.
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          origin: 'https://ops.example.com',
          'sec-fetch-site': 'same-origin',
        },
        body: new URLSearchParams({ batcher: b.name, token, ...fields }),
      });
    const plain = await serveLocally(dashboard({ batchers: [b], readOnly: false }));
    expect((await post(plain, await page(plain))).status).toBe(403);
    const proxied = await serveLocally(dashboard({ batchers: [b], readOnly: false, origins: ['https://ops.example.com'] }));
    const token = await page(proxied);
    expect((await post(proxied, token, { key: 'x'.repeat(5000) })).status).toBe(400);
    expect(await b.deadLetters.count()).toBe(1);
    expect(await (await post(proxied, token)).json()).toEqual({ purged: 1 });
    // Resuming a key that is not paused is the request's fault too.
    const resume = await fetch(`${proxied}/actions/resume`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'https://ops.example.com', 'x-csrf-token': token },
      body: JSON.stringify({ batcher: b.name, key: 'never-paused' }),
    });
    expect(resume.status).toBe(400);
    expect(() => dashboard({ batchers: [b], origins: ['https://ops.example.com/admin'] })).toThrow(
      /dashboard origins must be origins like/,
    );
  });

  it('mounted under a sub-path in Express, links and forms point under it', async () => {
    const { b, poison } = await workload();
    poison.clear();
    const app = express();
    app.use('/admin/queues', dashboard({ batchers: [b], readOnly: false }));
    const url = await serveLocally(app);
    const html = await (await fetch(`${url}/admin/queues`)).text();
    expect(html).toContain('href="/admin/queues/api/v1/stats"');
    expect(html).toContain('action="/admin/queues/actions/requeue"');
    const token = /name="token" value="([0-9a-f]+)"/.exec(html)?.[1] as string;
    const res = await fetch(`${url}/admin/queues/actions/requeue`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-csrf-token': token, accept: 'text/html' },
      body: JSON.stringify({ batcher: b.name }),
      redirect: 'manual',
    });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/admin/queues/');
    expect(await b.deadLetters.count()).toBe(0);
  });

  it('rejects bad options with an InvalidOptionError', () => {
    const b = testBatcher({ eachIteration: () => {} });
    expect(() => dashboard({ batchers: [] })).toThrow(InvalidOptionError);
    expect(() => dashboard({ batchers: [b, b] })).toThrow(/different names/);
    expect(() => dashboard({ batchers: [b], readOnly: 'no' as never })).toThrow(InvalidOptionError);
    expect(() => dashboard({ batchers: [b], deadLetters: -1 })).toThrow(InvalidOptionError);
  });
});

/** The points of an SVG path of M and L commands. */
const pointsOf = (d: string | null): [number, number][] =>
  [...(d ?? '').matchAll(/[ML]([\d.]+) ([\d.]+)/g)].map((m) => [Number(m[1]), Number(m[2])]);

/**
 * An hour of samples as a flood arrives and drains: 200,000 ids for `acme` at minute 10 and
 * 30,000 for `globex` at minute 20, worked off at about 95 ids/s; three ids dead-lettered at
 * minute 28; `initech` and `hooli` steady throughout, about what they hold in Redis now (the
 * caller takes the last sample from the real stats).
 */
function floodHour(name: string, end: number, now: { initech: number; hooli: number }): { at: number; processed: number; stats: Stats }[] {
  const samples: { at: number; processed: number; stats: Stats }[] = [];
  const waiting = { acme: 0, globex: 0 };
  const since = { acme: 0, globex: 0 };
  let processed = 0;
  for (let i = 0; i < 360; i++) {
    const at = end - (359 - i) * 10_000;
    if (i === 60) [waiting.acme, since.acme] = [200_000, at];
    if (i === 120) [waiting.globex, since.globex] = [30_000, at];
    const flood = waiting.acme + waiting.globex;
    const done = flood > 0 ? Math.round(950 + 100 * Math.sin(i / 7)) : 20;
    processed += done;
    // Fair scheduling shares the slots: each flooded key gets its part of the slices.
    const flooded = (['acme', 'globex'] as const).filter((k) => waiting[k] > 0);
    for (const k of flooded) waiting[k] = Math.max(0, waiting[k] - Math.ceil(done / flooded.length));
    const keys: KeyStats[] = [
      ...flooded.map((k) => ({ key: k, pending: waiting[k], inFlight: 8, retrying: 0, oldestPendingAgeMs: at - since[k] })),
      {
        key: 'initech',
        pending: Math.round(now.initech + 4 * Math.sin(i / 11)),
        inFlight: 0,
        retrying: i >= 150 && i < 175 ? 40 : 0,
        oldestPendingAgeMs: Math.round(30 + 20 * Math.sin(i / 13)),
      },
      {
        key: 'hooli',
        pending: Math.round(now.hooli + Math.cos(i / 5)),
        inFlight: 0,
        retrying: 0,
        oldestPendingAgeMs: Math.round(20 + 10 * Math.cos(i / 17)),
      },
    ];
    const sum = (field: 'pending' | 'inFlight' | 'retrying') => keys.reduce((n, k) => n + k[field], 0);
    const by = (score: (k: KeyStats) => number) => [...keys].sort((a, b) => score(b) - score(a)).slice(0, 5);
    samples.push({
      at,
      processed,
      stats: {
        name,
        at,
        keys: keys.length,
        pending: sum('pending'),
        inFlight: sum('inFlight'),
        retrying: sum('retrying'),
        dead: i >= 168 ? 3 : 0,
        oldestPendingAgeMs: Math.max(...keys.map((k) => k.oldestPendingAgeMs)),
        topKeys: by((k) => k.pending + k.retrying),
        laggingKeys: by((k) => k.oldestPendingAgeMs),
        scannedKeys: keys.length,
        truncated: false,
        paused: [],
        limits: { waiting: 0, heldMs: 0, waitedMs: 0, waits: 0 },
      },
    });
  }
  return samples;
}

describe('dashboard history', () => {
  it("draws the sampled history as inline SVG charts, with sparklines of the top keys, within the page's CSP", async () => {
    const gate = new Gate();
    const b = testBatcher({
      sliceSize: 2,
      history: { intervalMs: 100 },
      async eachIteration(_ids, ctx) {
        await Promise.race([gate.opened, new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }))]);
      },
    });
    await b.performBatchLater(range(6), { key: XSS_KEY });
    await b.performBatchLater(range(3), { key: 'light' });
    b.createWorker({ concurrency: 1 });
    await waitFor(async () => (await b.history()).samples.filter((s) => s.topKeys.length === 2).length >= 2, {
      what: 'samples of both keys waiting',
    });
    gate.open();
    await waitFor(async () => (await b.history()).samples.at(-1)?.keys === 0, { what: 'a sample of the drained batcher' });

    const url = await serveLocally(dashboard({ batchers: [b] }));
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('console', (m) => void (m.type() === 'error' && problems.push(m.text())));
    page.on('pageerror', (err) => void problems.push(err.message));
    await page.goto(`${url}/`);
    const section = page.locator(`section[data-batcher="${b.name}"]`);
    const figures = section.locator('figure.chart');
    expect(
      await figures.evaluateAll((all: { getAttribute(name: string): string | null }[]) => all.map((f) => f.getAttribute('data-metric'))),
    ).toEqual(['pending', 'in flight · retrying', 'dead', 'lag', 'ids/s']);
    expect(await section.locator('figure.chart svg.chart').count()).toBe(5);
    expect((await section.locator('figure[data-metric="pending"] svg').boundingBox())!.width).toBeGreaterThan(150);
    // The pending line rises off the baseline while the keys wait, and ends on it: drained.
    const pending = pointsOf(await section.locator('figure[data-metric="pending"] path.line').getAttribute('d'));
    expect(pending.length).toBeGreaterThanOrEqual(3);
    expect(Math.min(...pending.map(([, y]) => y))).toBeLessThan(62);
    expect(pending.at(-1)![1]).toBe(62);
    expect(await section.locator('figure[data-metric="ids/s"] path.line').count()).toBe(1);
    // One row per key that was on top, its markup shown as text, each with two sparklines.
    expect(await section.locator('table.sparks td.key').allInnerTexts()).toEqual([XSS_KEY, 'light']);
    expect(await section.locator('table.sparks svg.spark').count()).toBe(4);
    expect(await page.locator('main img, main b').count()).toBe(0);
    // Nothing the Content-Security-Policy refused (Chromium reports that on the console).
    expect(problems).toEqual([]);
  });

  it('an hour of samples: the flood and its drain at a glance (docs/dashboard-history.png)', async () => {
    const b = testBatcher({
      name: uniqueName('crm-sync'),
      history: false,
      eachIteration: (ids) => {
        throw new PermanentError('CRM rejected the record: 422 Unprocessable Entity', { ids });
      },
    });
    const worker = b.createWorker();
    await b.performBatchLater(['g-1041', 'g-1042', 'g-1043'], { key: 'globex' });
    await waitFor(async () => (await b.deadLetters.count()) === 3, { what: 'three dead letters' });
    await worker.close();
    const now = { initech: 120, hooli: 35 };
    await b.performBatchLater(range(now.initech), { key: 'initech' });
    await b.performBatchLater(range(now.hooli), { key: 'hooli' });
    // Written by the sampler's own encoding and script, an hour back from now.
    const redis = redisClient();
    defineScripts(redis);
    const hour = floodHour(b.name, await redisNow(redis), now);
    hour[359]!.stats = await b.stats({ top: 5 });
    for (const s of hour) {
      await runScript(
        redis,
        'history-append',
        [keyspaceOf(b).history.series],
        [encodeSample(s.at, s.processed, s.stats, 5), 10_000, 360, 3_600_000],
      );
    }

    const url = await serveLocally(dashboard({ batchers: [b] }));
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${url}/`);
    const section = page.locator(`section[data-batcher="${b.name}"]`);
    const pending = pointsOf(await section.locator('figure[data-metric="pending"] path.line').getAttribute('d'));
    expect(pending).toHaveLength(360);
    expect(await section.locator('figure[data-metric="pending"] .trend').innerText()).toMatch(
      /^(falling|rising) \d+% in 5\.0 min$|^steady over 5\.0 min$/,
    );
    expect(await section.locator('figure[data-metric="lag"] .max').innerText()).toMatch(/^max \d+\.\d min$/);
    // The keys on top now, then those that were on top earlier, by their peak.
    expect(await section.locator('table.sparks td.key').allInnerTexts()).toEqual(['initech', 'hooli', 'acme', 'globex']);
    mkdirSync('test-artifacts', { recursive: true });
    await page.screenshot({ path: 'test-artifacts/dashboard-history.png', fullPage: true });

    const res = await fetch(`${url}/api/v1/history`);
    expect(res.headers.get('content-type')).toContain('application/json');
    const body = (await res.json()) as { batchers: History[] };
    expect(body.batchers).toHaveLength(1);
    expect(body.batchers[0]!.samples).toEqual((await b.history()).samples);
    expect(body.batchers[0]!.samples.at(-1)).toMatchObject({
      pending: 155,
      dead: 3,
      topKeys: [
        { key: 'initech', backlog: 120 },
        { key: 'hooli', backlog: 35 },
      ],
    });
    expect((await fetch(`${url}/api/v1/history`, { method: 'POST' })).status).toBe(405);
  });

  it("GET /api/v1/history returns every batcher's samples, none for a batcher that never sampled", async () => {
    const b = testBatcher({ history: { intervalMs: 100 }, eachIteration: () => {} });
    const c = testBatcher({ history: false, eachIteration: () => {} });
    const worker = b.createWorker();
    await waitFor(async () => (await b.history()).samples.length >= 2, { what: 'two samples' });
    await worker.close(); // sampling stops, so both reads below see one series
    const url = await serveLocally(dashboard({ batchers: [b, c] }));
    const body = (await (await fetch(`${url}/api/v1/history`)).json()) as { batchers: History[] };
    expect(body.batchers.map((h) => h.name)).toEqual([b.name, c.name]);
    expect(body.batchers[0]!.samples).toEqual((await b.history()).samples);
    expect(body.batchers[1]!.samples).toEqual([]);
    expect(await (await fetch(`${url}/`)).text()).toContain('History: no samples yet');
  });
});

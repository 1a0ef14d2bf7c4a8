import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, InvalidIdsError, InvalidKeyError, InvalidOptionError, NotPausedError } from '../core/errors';
import { CHART_STYLE, historyCharts } from './charts';
import { esc, formatMs } from './html';
import { keyHref, keySection } from './key-page';
import { boolean, integer, isArray, onlyKnownOptions, optionNames } from '../core/validate';
import { describeLimits, parseConcurrencyInput, parseRateInput } from './limits';
import type {
  Batcher,
  DeadLetter,
  GlobalLimitsStats,
  History,
  KeyStats,
  PausedKey,
  PendingOptions,
  Stats,
  StatsOptions,
} from '../core/types';

/** The CLI formats lag as the page does. */

export interface DashboardOptions {
  /** The batchers to show, each by its name (names must differ). */
  batchers: readonly Batcher[];
  /** Without buttons, and POSTs are refused with 403. @default true */
  readOnly?: boolean;
  /** Dead letters listed per batcher on the page (most recent first). @default 50 */
  deadLetters?: number;
  /** Passed to each batcher's `stats()`. */
  stats?: StatsOptions;
  /**
   * Origins (`https://ops.example.com`) the page is also served under, for actions behind a proxy
   * that rewrites the Host header (nginx's default), where the browser's Origin and the Host the
   * app sees differ. @default [] (the request's own Host only)
   */
  origins?: readonly string[];
}

/** A Node request handler: `http.createServer(handler)`, `app.use('/path', handler)` in Express, or Fastify through middie. */
export type DashboardHandler = (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void;

/** Request bodies larger than this are refused: an action is a few short fields. */
const MAX_BODY = 64 * 1024;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function validate(
  options: DashboardOptions,
): Required<Omit<DashboardOptions, 'stats' | 'origins'>> & { stats: StatsOptions; origins: ReadonlySet<string> } {
  if (typeof options !== 'object' || options === null)
    throw new InvalidOptionError(`dashboard options must be an object, got ${describe(options)}`);
  onlyKnownOptions(
    'dashboard options',
    options,
    optionNames<DashboardOptions>()(['batchers', 'readOnly', 'deadLetters', 'stats', 'origins']),
  );
  const { batchers, readOnly = true, deadLetters = 50, stats = {}, origins = [] } = options;
  if (!isArray(batchers) || batchers.length === 0 || !batchers.every((b) => typeof b?.stats === 'function')) {
    throw new InvalidOptionError('dashboard batchers must be a non-empty array of batchers');
  }
  if (new Set(batchers.map((b) => b.name)).size !== batchers.length)
    throw new InvalidOptionError('dashboard batchers must have different names');
  return {
    batchers,
    readOnly: boolean('dashboard readOnly', readOnly, true),
    deadLetters: integer('dashboard deadLetters', deadLetters, 50, 0, 1000),
    stats,
    origins: new Set(validateOrigins(origins)),
  };
}

/** Each allowed origin (scheme, host and port: what an Origin header is compared with). */
function validateOrigins(origins: unknown): string[] {
  if (!Array.isArray(origins))
    throw new InvalidOptionError(`dashboard origins must be an array of origins like 'https://ops.example.com', got ${describe(origins)}`);
  return origins.map((origin: unknown) => {
    const url = typeof origin === 'string' && URL.canParse(origin) ? new URL(origin) : undefined;
    if (!url || url.origin !== origin)
      throw new InvalidOptionError(
        `dashboard origins must be origins like 'https://ops.example.com' (scheme, host, port; no path), got ${describe(origin)}`,
      );
    return url.origin;
  });
}

/**
 * The operator's page and `/api/v1/stats`. It authenticates nobody: mount it behind the app's
 * own auth. Actions (requeue, purge, pause, resume, limits, drop) exist only with `readOnly: false`, and need a same-origin
 * request carrying this handler's token, so another site cannot post them with the operator's cookies.
 */
export function dashboard(options: DashboardOptions): DashboardHandler {
  const opts = validate(options);
  const token = randomBytes(24).toString('hex');
  const byName = new Map(opts.batchers.map((b) => [b.name, b]));

  const route = async (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0] || '/';
    const base = basePath(req, path);
    if (path === '/api/v1/stats') {
      if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'use GET');
      const stats = await Promise.all(opts.batchers.map((b) => b.stats(opts.stats)));
      return send(res, 200, 'application/json; charset=utf-8', JSON.stringify({ batchers: stats }));
    }
    if (path === '/api/v1/history') {
      if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'use GET');
      const history = await Promise.all(opts.batchers.map((b) => b.history()));
      return send(res, 200, 'application/json; charset=utf-8', JSON.stringify({ batchers: history }));
    }
    if (path === '/' || path === '') {
      if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'use GET');
      const views = await Promise.all(
        opts.batchers.map(async (b) => ({
          stats: await b.stats(opts.stats),
          letters: opts.deadLetters > 0 ? (await b.deadLetters.list({ limit: opts.deadLetters })).letters : [],
          history: await b.history(),
        })),
      );
      const ctx = { base, readOnly: opts.readOnly, token, nonce: pageNonce(res) };
      return send(res, 200, 'text/html; charset=utf-8', page(views.map((v) => section(ctx, v)).join(''), ctx));
    }
    if (path === '/keys') {
      if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'use GET');
      const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
      const batcher = byName.get(query.get('batcher') ?? '');
      if (!batcher) throw new HttpError(404, 'unknown batcher');
      const key = fromBase64url('key64', query.get('key64') ?? '');
      if (key === undefined) throw new HttpError(400, 'the key page needs key64');
      const options = pendingQuery(query);
      const [pending, held] = await Promise.all([batcher.pending(key, options), batcher.inFlight(key)]);
      const ctx = { base, readOnly: true, token: '', nonce: pageNonce(res) };
      const view = { base, batcher: batcher.name, key, level: options.level, page: pending, held };
      return send(res, 200, 'text/html; charset=utf-8', page(keySection(view), ctx));
    }
    const action = /^\/actions\/(requeue|purge|pause|resume|limits|drop)$/.exec(path)?.[1] as Action | undefined;
    if (action) {
      if (req.method !== 'POST') throw new HttpError(405, 'use POST');
      if (opts.readOnly) throw new HttpError(403, 'this dashboard is read-only');
      checkSameOrigin(req, opts.origins);
      const form = await readForm(req);
      if (!sameToken(form.token, token)) throw new HttpError(403, 'missing or wrong token: reload the page');
      const batcher = byName.get(form.batcher ?? '');
      if (!batcher) throw new HttpError(400, 'unknown batcher');
      const reply = await act(batcher, action, form);
      if (!(req.headers.accept ?? '').includes('text/html'))
        return send(res, 200, 'application/json; charset=utf-8', JSON.stringify(reply));
      res.statusCode = 303;
      res.setHeader('Location', `${base}/`);
      res.end();
      return;
    }
    if (next) return next();
    throw new HttpError(404, 'not found');
  };

  return (req, res, next) => {
    route(req, res, next).catch((err: unknown) => {
      if (res.headersSent) return res.destroy();
      // Bad input in an action (an unknown option, an invalid key or id) is the request's fault.
      const status = err instanceof HttpError ? err.status : isBadInput(err) ? 400 : 500;
      send(res, status, 'text/plain; charset=utf-8', status === 500 ? 'internal error' : (err as Error).message);
    });
  };
}

type Action = 'requeue' | 'purge' | 'pause' | 'resume' | 'limits' | 'drop';

/** Runs a posted action; its JSON reply. */
async function act(batcher: Batcher, action: Action, form: Record<string, string | undefined>): Promise<Record<string, unknown>> {
  if (action === 'limits') {
    // A field left empty leaves its limit as it is.
    const rate = form.rate?.trim() ? parseRateInput(form.rate) : undefined;
    const concurrency = form.concurrency?.trim() ? parseConcurrencyInput(form.concurrency) : undefined;
    // Nothing to set is a mistake (a misspelt field, say), not a success that changed nothing.
    if (rate === undefined && concurrency === undefined) throw new HttpError(400, 'limits needs rate or concurrency');
    if (rate !== undefined) await batcher.setGlobalRateLimit(rate);
    if (concurrency !== undefined) await batcher.setGlobalConcurrency(concurrency);
    return { limits: (await batcher.stats({ maxKeys: 1, top: 1 })).limits };
  }
  if (action === 'drop') {
    if (form.key === undefined) throw new HttpError(400, 'drop needs a key');
    return { key: form.key, dropped: await batcher.drop(form.key, { deadLetters: form.deadLetters === 'true' }) };
  }
  if (action === 'pause' || action === 'resume') {
    if (form.key === undefined) throw new HttpError(400, `${action} needs a key`);
    await (action === 'pause' ? batcher.pause(form.key) : batcher.resume(form.key));
    return { [action === 'pause' ? 'paused' : 'resumed']: form.key };
  }
  const query = { ...(form.key && { key: form.key }), ...(form.id && { ids: [form.id] }) };
  const count = await batcher.deadLetters[action](query);
  return { [action === 'requeue' ? 'requeued' : 'purged']: count };
}

function isBadInput(err: unknown): boolean {
  return (
    err instanceof InvalidOptionError || err instanceof InvalidKeyError || err instanceof InvalidIdsError || err instanceof NotPausedError
  );
}

/** Where the handler is mounted: Express strips it from `req.url` and keeps it in `originalUrl`. */
function basePath(req: IncomingMessage, path: string): string {
  const original = ((req as { originalUrl?: string }).originalUrl ?? req.url ?? '/').split('?')[0] ?? '/';
  const base = original.endsWith(path) ? original.slice(0, original.length - path.length) : original;
  return base.replace(/\/+$/, '');
}

/**
 * A cross-site form post carries the operator's cookies; browsers say where it came from in
 * Sec-Fetch-Site and Origin. The token covers old browsers that send neither. The Origin must be
 * this server's own (scheme, host and port: a page served over http must not act on an https
 * one, nor another port) or one of `origins`; the scheme is the connection's, or a proxy's
 * X-Forwarded-Proto (a cross-site form post cannot set that header).
 */
function checkSameOrigin(req: IncomingMessage, allowed: ReadonlySet<string>): void {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin') throw new HttpError(403, 'cross-site request refused');
  const origin = req.headers.origin;
  if (origin === undefined) return;
  const forwarded = req.headers['x-forwarded-proto'];
  const proto = (typeof forwarded === 'string' ? forwarded.split(',')[0]!.trim() : '') || (isEncrypted(req) ? 'https' : 'http');
  const originOf = (url: string) => (URL.canParse(url) ? new URL(url).origin : undefined);
  const given = originOf(origin);
  const own = originOf(`${proto}://${req.headers.host ?? ''}`);
  if (given === undefined || given === 'null' || (given !== own && !allowed.has(given)))
    throw new HttpError(403, 'cross-site request refused');
}

function isEncrypted(req: IncomingMessage): boolean {
  return (req.socket as { encrypted?: boolean }).encrypted === true;
}

/** Compares as bytes: a token of another byte length (non-ASCII) is simply wrong, never an error. */
function sameToken(given: string | undefined, token: string): boolean {
  if (given === undefined) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

async function readForm(req: IncomingMessage): Promise<Record<string, string | undefined>> {
  // A framework may have parsed the body already (express.urlencoded or express.json).
  const parsed = (req as { body?: unknown }).body;
  const headerToken = typeof req.headers['x-csrf-token'] === 'string' ? req.headers['x-csrf-token'] : undefined;
  let fields: Record<string, unknown>;
  // A body the host app parsed to something that is no object (JSON `null`, an array) is no form.
  if (parsed === null || Array.isArray(parsed)) throw new HttpError(400, 'the body must be a form or a JSON object');
  if (parsed && typeof parsed === 'object' && !Buffer.isBuffer(parsed)) fields = parsed as Record<string, unknown>;
  else {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BODY) throw new HttpError(413, 'request body too large');
      chunks.push(chunk);
    }
    const text = Buffer.concat(chunks).toString('utf8');
    if ((req.headers['content-type'] ?? '').includes('application/json')) {
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : {};
      } catch {
        throw new HttpError(400, 'invalid JSON body');
      }
      if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, 'the JSON body must be an object');
      fields = body as Record<string, unknown>;
    } else fields = Object.fromEntries(new URLSearchParams(text));
  }
  const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  // The page's forms send keys and ids encoded (see ENCODED_FIELDS); API clients may send them as text.
  const decoded = (name: string, v: unknown) => fromBase64url(name, str(v) ?? '');
  return {
    batcher: str(fields.batcher),
    key: str(fields.key) ?? decoded('key64', fields.key64),
    id: str(fields.id) ?? decoded('id64', fields.id64),
    token: str(fields.token) ?? headerToken,
    rate: limitField('rate', fields.rate),
    concurrency: limitField('concurrency', fields.concurrency),
    deadLetters: flagField('deadLetters', fields.deadLetters),
  };
}

/** A key or id sent as base64url (see ENCODED_FIELDS); undefined for none. */
function fromBase64url(name: string, text: string): string | undefined {
  if (text === '') return undefined;
  if (!/^[A-Za-z0-9_-]*$/.test(text)) throw new HttpError(400, `${name} must be base64url`);
  return Buffer.from(text, 'base64url').toString('utf8');
}

/** The key page's paging, from its query (the library checks the values: a bad one is a 400). */
function pendingQuery(query: URLSearchParams): PendingOptions {
  const number = (name: string) => (query.has(name) ? Number(query.get(name)) : undefined);
  const options: PendingOptions = {};
  const level = query.get('level');
  if (level !== null) options.level = level as PendingOptions['level'];
  const offset = number('offset');
  if (offset !== undefined) options.offset = offset;
  const cursor = query.get('cursor');
  if (cursor !== null) options.cursor = cursor;
  const limit = number('limit');
  if (limit !== undefined) options.limit = limit;
  return options;
}

/** A fresh nonce for the page's one script, and the policy that allows it alone. */
function pageNonce(res: ServerResponse): string {
  const nonce = randomBytes(16).toString('base64');
  res.setHeader(
    'Content-Security-Policy',
    `default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-${nonce}'; connect-src 'self'; form-action 'self'; ` +
      `frame-ancestors 'self'`,
  );
  return nonce;
}

/**
 * A limit's field as posted: text (the form's, or a JSON string), or for `concurrency` a JSON
 * number, which the docs allow. Any other value (an object, an array, null, a number for `rate`)
 * is a 400 that says what is taken: read as text it was dropped, and the action answered 200
 * having set nothing.
 */
function limitField(name: 'rate' | 'concurrency', v: unknown): string | undefined {
  if (v === undefined || v === '') return undefined;
  if (typeof v === 'string') return v;
  if (name === 'concurrency' && typeof v === 'number') return String(v);
  const taken = name === 'rate' ? "text: max/durationMs (600/60000, say) or 'off'" : "a number, or text: a number or 'off'";
  throw new HttpError(400, `${name} must be ${taken}, got ${JSON.stringify(v)}`);
}

/** A yes/no field (drop's `deadLetters`): a JSON boolean, or text 'true' or 'false'; absent is 'false'. */
function flagField(name: string, v: unknown): 'true' | 'false' {
  if (v === undefined || v === '' || v === false || v === 'false') return 'false';
  if (v === true || v === 'true') return 'true';
  throw new HttpError(400, `${name} must be true or false, got ${JSON.stringify(v)}`);
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.statusCode = status;
  res.setHeader('Content-Type', type);
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.end(body);
}

interface PageContext {
  base: string;
  readOnly: boolean;
  token: string;
  nonce: string;
}

/**
 * A key or id goes into a form as base64url of its UTF-8 (`key64`, `id64`): a browser turns LF
 * into CRLF in a form post and NUL into U+FFFD in HTML, so a key holding them, sent as text,
 * would come back as another key (or none). Every key string round-trips this way.
 */
const ENCODED_FIELDS: Readonly<Record<string, string>> = { key: 'key64', id: 'id64' };

function actionForm(ctx: PageContext, action: Action, fields: Record<string, string>, label: string): string {
  const hidden = Object.entries({ ...fields, token: ctx.token })
    .map(([name, value]) => {
      const encoded = ENCODED_FIELDS[name];
      const [field, text] = encoded ? [encoded, Buffer.from(value, 'utf8').toString('base64url')] : [name, value];
      return `<input type="hidden" name="${esc(field)}" value="${esc(text)}">`;
    })
    .join('');
  const confirm = action === 'purge' ? ' data-confirm="Delete these dead letters for good?"' : '';
  return (
    `<form method="post" action="${esc(`${ctx.base}/actions/${action}`)}"${confirm}>${hidden}<button type="submit" ` +
    `class="${action}">${esc(label)}</button></form>`
  );
}

/** A key, linked to its page. */
function keyLink(ctx: PageContext, name: string, key: string): string {
  return `<a href="${esc(keyHref(ctx.base, name, key))}">${esc(key)}</a>`;
}

function keyTable(ctx: PageContext, name: string, caption: string, keys: KeyStats[]): string {
  if (keys.length === 0) return `<p class="empty">${esc(caption)}: none</p>`;
  const rows = keys
    .map(
      (k) =>
        `<tr><td class="key">${keyLink(ctx, name, k.key)}</td><td>${k.pending}</td><td>${k.inFlight}</td><td>${k.retrying}</td><td>` +
        `${esc(formatMs(k.oldestPendingAgeMs))}</td></tr>`,
    )
    .join('');
  return (
    `<table><caption>${esc(caption)}</caption><tr><th>key</th><th>pending</th><th>in flight</th><th>retrying</th><th>lag</th></tr>` +
    `${rows}</table>`
  );
}

/** The batcher-wide limits and their use, with a form to change them (unless read-only). */
function limitsLine(ctx: PageContext, name: string, limits: GlobalLimitsStats): string {
  const form = ctx.readOnly
    ? ''
    : `<form class="limits" method="post" action="${esc(`${ctx.base}/actions/limits`)}"><input type="hidden" name="batcher" ` +
      `value="${esc(name)}"><input type="hidden" name="token" value="${esc(ctx.token)}"><input name="rate" placeholder="600/60000 or off" ` +
      `aria-label="rate limit: max ids per ms"><input name="concurrency" placeholder="8 or off" aria-label="concurrency cap">` +
      `<button type="submit">set limits</button></form>`;
  return `<p class="limits">Limits: ${esc(describeLimits(limits))}</p>${form}`;
}

/** The page lists at most this many paused keys (those ending first): 20,000 made a 7.7 MB page of 20,001 forms. */
const MAX_PAUSED_SHOWN = 100;

/** Paused keys, with a resume button each and a form to pause one (unless read-only). */
function pausedTable(ctx: PageContext, name: string, paused: PausedKey[]): string {
  const pauseForm = ctx.readOnly
    ? ''
    : `<form class="pause" method="post" action="${esc(`${ctx.base}/actions/pause`)}"><input type="hidden" name="batcher" ` +
      `value="${esc(name)}"><input type="hidden" name="token" value="${esc(ctx.token)}"><input name="key" placeholder="key" required ` +
      `aria-label="key to pause"><button type="submit">pause key</button></form>`;
  if (paused.length === 0) return `<p class="empty">Paused keys: none</p>${pauseForm}`;
  const more = paused.length - MAX_PAUSED_SHOWN;
  const rows = paused
    .slice(0, MAX_PAUSED_SHOWN)
    .map((p) => {
      const until = p.untilMs === undefined ? 'until resumed' : new Date(p.untilMs).toISOString();
      const resume = ctx.readOnly ? '' : `<td class="actions">${actionForm(ctx, 'resume', { batcher: name, key: p.key }, 'resume')}</td>`;
      return `<tr><td class="key">${keyLink(ctx, name, p.key)}</td><td>${esc(until)}</td>${resume}</tr>`;
    })
    .join('');
  return (
    `<table class="paused"><caption>Paused keys (${paused.length})</caption><tr><th>key</th><th>until</th>` +
    `${ctx.readOnly ? '' : '<th></th>'}</tr>${rows}</table>` +
    (more > 0 ? `<p class="empty">and ${more} more, not shown (see paused(), or the CLI's paused)</p>` : '') +
    pauseForm
  );
}

function deadTable(ctx: PageContext, name: string, letters: DeadLetter[], total: number): string {
  if (letters.length === 0) return '<p class="empty">Dead letters: none</p>';
  const rows = letters
    .map((l) => {
      const actions = ctx.readOnly
        ? ''
        : `<td class="actions">${actionForm(ctx, 'requeue', { batcher: name, key: l.key, id: l.id }, 'requeue')}` +
          `${actionForm(ctx, 'purge', { batcher: name, key: l.key, id: l.id }, 'purge')}</td>`;
      return (
        `<tr><td class="key">${keyLink(ctx, name, l.key)}</td><td>${esc(l.id)}</td><td>${l.attempts}</td><td class="error">` +
        `${esc(`${l.error.name}: ${l.error.message}`)}</td><td>${esc(new Date(l.lastFailedAt).toISOString())}</td>${actions}</tr>`
      );
    })
    .join('');
  const all = ctx.readOnly
    ? ''
    : `<div class="bulk">${actionForm(ctx, 'requeue', { batcher: name }, `requeue all ${total}`)}` +
      `${actionForm(ctx, 'purge', { batcher: name }, `purge all ${total}`)}</div>`;
  return (
    `<table class="dead"><caption>Dead letters (${letters.length} of ${total}, most recent first)</caption><tr><th>key</th><th>` +
    `id</th><th>attempts</th><th>error</th><th>last failed</th>${ctx.readOnly ? '' : '<th></th>'}</tr>${rows}</table>${all}`
  );
}

interface View {
  stats: Stats;
  letters: DeadLetter[];
  history: History;
}

function section(ctx: PageContext, { stats: s, letters, history }: View): string {
  const totals: [string, string | number][] = [
    ['keys', s.keys],
    ['pending', s.pending],
    ['in flight', s.inFlight],
    ['retrying', s.retrying],
    ['dead', s.dead],
    ['lag', formatMs(s.oldestPendingAgeMs)],
  ];
  const cards = totals
    .map(([label, value]) => `<div class="card"><div class="value">${esc(value)}</div><div class="label">${esc(label)}</div></div>`)
    .join('');
  const note = s.truncated
    ? `<p class="warn">Only the first ${s.scannedKeys} indexed keys were read (maxKeys): totals are partial.</p>`
    : '';
  return (
    `<section data-batcher="${esc(s.name)}"><h2>${esc(s.name)}</h2><div class="cards">${cards}</div>` +
    `${note}${historyCharts(history)}<div class="grid">` +
    `${keyTable(ctx, s.name, 'Top keys by backlog', s.topKeys)}${keyTable(ctx, s.name, 'Top keys by lag', s.laggingKeys)}</div>` +
    `${limitsLine(ctx, s.name, s.limits)}${pausedTable(ctx, s.name, s.paused)}${deadTable(ctx, s.name, letters, s.dead)}</section>`
  );
}

const STYLE =
  `body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f5f6f8;color:#1d2330}header{background:#1d2330;color:#fff;` +
  `padding:12px 24px;display:flex;justify-content:space-between;align-items:center}header a{color:#9cc3ff}main{padding:16px 24px}` +
  `section{background:#fff;border-radius:8px;padding:16px;margin-bottom:16px;box-shadow:0 1px 2px #0002}h2{margin:0 0 12px}` +
  `.cards{display:flex;gap:12px;flex-wrap:wrap}.card{background:#eef2f8;border-radius:6px;padding:8px 16px;min-width:90px}` +
  `.value{font-size:22px;font-weight:600}.label{color:#5a6478}.grid{display:grid;grid-template-columns:1fr 1fr;gap:16px;` +
  `margin-top:12px}table{border-collapse:collapse;width:100%;margin-top:12px}caption{text-align:left;font-weight:600;padding:4px 0}th,` +
  `td{text-align:left;padding:4px 8px;border-bottom:1px solid #e3e6ec;vertical-align:top}.key{font-family:ui-monospace,monospace;` +
  `word-break:break-all}.error{color:#a4262c;font-family:ui-monospace,monospace}.actions form,.bulk form{display:inline}` +
  `form.pause,form.limits{margin-top:8px}.bulk{margin-top:8px}button{cursor:pointer;border:1px solid #8a94a8;background:#fff;border-radius:4px;` +
  `padding:2px 8px;margin-right:4px}button.purge{color:#a4262c}.empty{color:#5a6478}.warn{color:#8a5a00}`;

/** The page around its sections (the batchers', or a key's). */
function page(body: string, ctx: PageContext): string {
  const script =
    `document.querySelectorAll('form[data-confirm]').forEach(function(f){f.addEventListener('submit',` +
    `function(e){if(!confirm(f.dataset.confirm))e.preventDefault();});});`;
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,` +
    `initial-scale=1"><title>batch-by-key</title><style>${STYLE}${CHART_STYLE}</style></head><body><header><strong>` +
    `batch-by-key</strong><span>${ctx.readOnly ? 'read-only · ' : ''}<a href="${esc(`${ctx.base}/api/v1/stats`)}">/api/v1/stats</a> · ` +
    `<a href="${esc(`${ctx.base}/api/v1/history`)}">/api/v1/history</a> · <a href="${esc(`${ctx.base}/`)}">refresh</a></span></header>` +
    `<main>${body}</main><script nonce="${esc(ctx.nonce)}">${script}</script></body></html>`
  );
}

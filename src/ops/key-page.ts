import type { KeyInFlight, PendingOptions, PendingPage } from '../core/types';
import { esc } from './html';

/**
 * The dashboard's page of one key (GET /keys?batcher=…&key64=…): its counts, the slices its runs
 * hold and wait to retry, and a page of its pending ids in the order they will run. Read only:
 * no form, whatever the dashboard's `readOnly`. Every key, id and datum is user data, escaped.
 */

/** A key in a URL's query: base64url of its UTF-8, as the page's forms send keys (a key may hold a NUL or a newline). */
export function keyHref(base: string, batcher: string, key: string, options: PendingOptions = {}): string {
  const query = new URLSearchParams({ batcher, key64: Buffer.from(key, 'utf8').toString('base64url') });
  for (const [name, value] of Object.entries(options)) if (value !== undefined) query.set(name, String(value));
  return `${base}/keys?${query.toString()}`;
}

export interface KeyView {
  base: string;
  batcher: string;
  key: string;
  level: PendingOptions['level'];
  page: PendingPage;
  held: KeyInFlight;
}

const ids = (list: readonly string[]): string => list.map((id) => `<span class="id">${esc(id)}</span>`).join(' ');
const time = (ms: number): string => esc(new Date(ms).toISOString());

export function keySection({ base, batcher, key, level, page, held }: KeyView): string {
  const inFlight = held.running.reduce((n, slice) => n + slice.ids.length, 0);
  const retrying = held.retrying.reduce((n, slice) => n + slice.ids.length, 0);
  const cards = (
    [
      ['pending high', page.high],
      ['pending normal', page.normal],
      ['in flight', inFlight],
      ['retrying', retrying],
    ] as const
  )
    .map(([label, value]) => `<div class="card"><div class="value">${value}</div><div class="label">${esc(label)}</div></div>`)
    .join('');
  const running =
    held.running.length === 0
      ? '<p class="empty">Running: none</p>'
      : `<table class="running"><caption>Running</caption><tr><th>lane</th><th>attempt</th><th>level</th><th>ids</th></tr>${held.running
          .map(
            (r) =>
              `<tr><td>${r.lane}</td><td>${r.attempt}</td><td>${r.high ? 'high' : 'normal'}</td><td class="key">${ids(r.ids)}</td></tr>`,
          )
          .join('')}</table>`;
  const retries =
    held.retrying.length === 0
      ? '<p class="empty">Retrying: none</p>'
      : `<table class="retrying"><caption>Retrying</caption><tr><th>slice</th><th>attempts</th><th>due</th><th>first failed</th>` +
        `<th>ids</th></tr>${held.retrying
          .map(
            (r) =>
              `<tr><td class="key">${esc(r.sliceId)}</td><td>${r.attempts}</td><td>${time(r.dueAt)}</td><td>${time(r.firstFailedAt)}</td>` +
              `<td class="key">${ids(r.ids)}</td></tr>`,
          )
          .join('')}</table>`;
  const rows = page.ids
    .map(
      (p) =>
        `<tr><td class="key">${esc(p.id)}</td><td>${p.level}</td><td>${p.readyAt === undefined ? '' : time(p.readyAt)}</td>` +
        `<td class="key">${p.payloads.length === 0 ? '' : esc(JSON.stringify(p.payloads))}</td></tr>`,
    )
    .join('');
  const pending =
    page.ids.length === 0
      ? '<p class="empty">Pending: none listed</p>'
      : `<table class="pending"><caption>Pending, in the order they will run (${page.ids.length} listed)</caption><tr><th>id</th>` +
        `<th>level</th><th>ready at</th><th>data</th></tr>${rows}</table>`;
  const next = page.next ? `<p><a class="next" href="${esc(keyHref(base, batcher, key, { level, ...page.next }))}">next page</a></p>` : '';
  return (
    `<section data-batcher="${esc(batcher)}"><h2><span class="key">${esc(key)}</span> · ${esc(batcher)}</h2>` +
    `<div class="cards">${cards}</div>${running}${retries}${pending}${next}</section>`
  );
}

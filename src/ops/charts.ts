import { esc, formatMs } from './html';
import type { History, HistorySample } from '../core/types';

/**
 * The dashboard's charts of a batcher's history, drawn on the server as inline SVG: no script, no
 * CDN, nothing the page's Content-Security-Policy would have to allow. Each chart stretches to its
 * box (`preserveAspectRatio="none"`, strokes that do not scale); numbers are HTML beside it.
 */

/** The viewBox of a total's chart and of a key's sparkline, and the class each svg gets. */
interface Box {
  width: number;
  height: number;
  cls: 'chart' | 'spark';
}
const CHART: Box = { width: 300, height: 64, cls: 'chart' };
const SPARK: Box = { width: 120, height: 24, cls: 'spark' };
/** Consecutive samples further apart than this many of their usual spacing leave a gap in the line. */
const GAP_FACTOR = 2.5;
/** The trend of the backlog and the lag is read over this long (or the whole series if shorter). */
const TREND_MS = 5 * 60_000;
/** A change within this share of the larger value reads as steady. */
const STEADY = 0.05;
/** Keys given a sparkline: those of the latest sample, then those that were top earlier. */
const SPARK_KEYS = 10;

type Value = number | undefined;
type Kind = 'pending' | 'inflight' | 'retrying' | 'dead' | 'lag' | 'rate' | 'backlog';

interface Line {
  label: string;
  kind: Kind;
  values: Value[];
}

interface Frame {
  /** x of each sample in [0, 1]: from the first sample to the time of the reading. */
  xs: number[];
  /** Whether the line breaks before sample i (no sample came for a while). */
  gapBefore: boolean[];
  spanMs: number;
}

function frameOf(h: History): Frame {
  const { samples } = h;
  const first = samples[0]?.at ?? h.at;
  const end = Math.max(h.at, samples.at(-1)?.at ?? h.at);
  const spanMs = end - first;
  const xs = samples.map((s) => (spanMs > 0 ? (s.at - first) / spanMs : 1));
  const steps = samples.slice(1).map((s, i) => s.at - (samples[i] as HistorySample).at);
  const usual = [...steps].sort((a, b) => a - b)[Math.floor(steps.length / 2)] ?? 0;
  const gapBefore = samples.map((_, i) => i > 0 && usual > 0 && (steps[i - 1] as number) > usual * GAP_FACTOR);
  return { xs, gapBefore, spanMs };
}

const round = (n: number): number => Math.round(n * 10) / 10;

type Point = [number, number];

/** The points of each run of known values, in the box; a run of one point gets a short stub so it shows. */
function runsOf(frame: Frame, values: readonly Value[], max: number, box: Box): Point[][] {
  const pad = 2;
  const y = (v: number) => round(box.height - pad - (v / max) * (box.height - 2 * pad));
  const runs: Point[][] = [];
  let run: Point[] = [];
  values.forEach((v, i) => {
    if (v === undefined || frame.gapBefore[i]) {
      if (run.length > 0) runs.push(run);
      run = [];
    }
    if (v !== undefined) run.push([round((frame.xs[i] as number) * box.width), y(v)]);
  });
  if (run.length > 0) runs.push(run);
  return runs.map((points) => (points.length === 1 ? [[Math.max(0, points[0]![0] - 2), points[0]![1]], points[0]!] : points));
}

const through = (points: readonly Point[]): string => points.map(([x, y], i) => `${i === 0 ? 'M' : 'L'}${x} ${y}`).join('');
/** Each run closed down to the baseline. */
const under = (points: readonly Point[], height: number): string =>
  `M${points[0]![0]} ${height}${through(points).replace(/^M/, 'L')}L${points.at(-1)![0]} ${height}Z`;

const maxOf = (lines: readonly Line[]): number =>
  Math.max(1, ...lines.flatMap((l) => l.values.filter((v): v is number => v !== undefined)));

function svg(frame: Frame, lines: readonly Line[], box: Box, title: string): string {
  const max = maxOf(lines);
  const paths = lines
    .map((l, i) => {
      const runs = runsOf(frame, l.values, max, box);
      if (runs.length === 0) return '';
      // The first line's area makes a single series readable at a glance; a second stays a line.
      const area = i === 0 ? `<path class="area k-${l.kind}" d="${runs.map((r) => under(r, box.height)).join('')}"/>` : '';
      return `${area}<path class="line k-${l.kind}" data-series="${esc(l.label)}" d="${runs.map(through).join('')}"/>`;
    })
    .join('');
  return (
    `<svg class="${box.cls}" viewBox="0 0 ${box.width} ${box.height}" preserveAspectRatio="none" role="img" ` +
    `aria-label="${esc(title)}"><title>${esc(title)}</title><line class="axis" x1="0" y1="${box.height - 0.5}" x2="${box.width}" ` +
    `y2="${box.height - 0.5}"/>${paths}</svg>`
  );
}

const count = (n: number): string => (n < 10 && !Number.isInteger(n) ? n.toFixed(1) : Math.round(n).toLocaleString('en-US'));

/** Whether `values` rose or fell over the last TREND_MS: is the batcher catching up? */
function trend(samples: readonly HistorySample[], values: readonly Value[]): string {
  const last = samples.length - 1;
  const now = values[last];
  if (last < 1 || now === undefined) return '';
  const lastAt = (samples[last] as HistorySample).at;
  const from = Math.max(
    0,
    samples.findIndex((s) => s.at >= lastAt - TREND_MS),
  );
  const then = values[from];
  if (from === last || then === undefined) return '';
  const over = formatMs(lastAt - (samples[from] as HistorySample).at);
  // A wobble of a few percent is noise, not a trend.
  if (Math.abs(now - then) <= STEADY * Math.max(now, then)) return `<span class="trend steady">steady over ${esc(over)}</span>`;
  const change = then === 0 ? `from 0` : `${Math.round((Math.abs(now - then) / then) * 100)}%`;
  return now < then
    ? `<span class="trend down">falling ${change} in ${esc(over)}</span>`
    : `<span class="trend up">rising ${change} in ${esc(over)}</span>`;
}

function chart(h: History, frame: Frame, metric: string, lines: Line[], show: (n: number) => string, withTrend: boolean): string {
  const last = h.samples.length - 1;
  const span = formatMs(frame.spanMs);
  const nows = lines.map((l) => `${l.label} ${l.values[last] === undefined ? '–' : show(l.values[last])}`).join(', ');
  const title = `${metric} over the last ${span}: now ${nows}; max ${show(maxOf(lines))}`;
  const nowOf = (l: Line) => `<span class="now">${l.values[last] === undefined ? '–' : esc(show(l.values[last]))}</span>`;
  // One line: its name and value; several: a key of colours, each with its value.
  const legend =
    lines.length > 1
      ? lines
          .map(
            (l) => `<span class="legend k-${l.kind}"><i class="swatch"></i><span class="metric">${esc(l.label)}</span> ${nowOf(l)}</span>`,
          )
          .join('')
      : `<span class="metric">${esc(metric)}</span>${lines[0] ? nowOf(lines[0]) : ''}`;
  const change = withTrend ? trend(h.samples, lines[0]?.values ?? []) : '';
  return (
    `<figure class="chart" data-metric="${esc(metric)}"><figcaption>${legend}${change}<span class="max">max ` +
    `${esc(show(maxOf(lines)))}</span></figcaption>${svg(frame, lines, CHART, title)}<div class="span"><span>${esc(span)} ago</span>` +
    `<span>now</span></div></figure>`
  );
}

/** The keys to draw: the latest sample's (most waiting first), then earlier ones by their peak. */
function sparkKeys(samples: readonly HistorySample[]): string[] {
  const peak = new Map<string, number>();
  for (const s of samples) for (const k of s.topKeys) peak.set(k.key, Math.max(peak.get(k.key) ?? 0, k.backlog));
  const latest = (samples.at(-1)?.topKeys ?? []).map((k) => k.key);
  const earlier = [...peak.keys()].filter((k) => !latest.includes(k)).sort((a, b) => (peak.get(b) as number) - (peak.get(a) as number));
  return [...latest, ...earlier].slice(0, SPARK_KEYS);
}

function sparkTable(h: History, frame: Frame): string {
  const keys = sparkKeys(h.samples);
  if (keys.length === 0) return '';
  const last = h.samples.at(-1);
  const rows = keys
    .map((key) => {
      const of = h.samples.map((s) => s.topKeys.find((k) => k.key === key));
      const backlog: Line = { label: 'waiting', kind: 'backlog', values: of.map((k) => k?.backlog) };
      const lag: Line = { label: 'lag', kind: 'lag', values: of.map((k) => k?.oldestPendingAgeMs) };
      const now = last?.topKeys.find((k) => k.key === key);
      return (
        `<tr><td class="key">${esc(key)}</td><td>${now ? esc(count(now.backlog)) : '–'}</td><td>` +
        `${svg(frame, [backlog], SPARK, `${key}: ids waiting, max ${count(maxOf([backlog]))}`)}</td>` +
        `<td>${now ? esc(formatMs(now.oldestPendingAgeMs)) : '–'}</td><td>` +
        `${svg(frame, [lag], SPARK, `${key}: lag, max ${formatMs(maxOf([lag]))}`)}</td></tr>`
      );
    })
    .join('');
  return (
    `<table class="sparks"><caption>Top keys over the last ${esc(formatMs(frame.spanMs))} <span class="note">(a gap: not among ` +
    `the top keys then)</span></caption><tr><th>key</th><th>waiting</th><th></th><th>lag</th><th></th></tr>${rows}</table>`
  );
}

/** A batcher's history as charts: its totals over time, and its top keys' backlog and lag. */
export function historyCharts(h: History): string {
  const { samples } = h;
  if (samples.length === 0) {
    return (
      '<div class="history"><p class="empty">History: no samples yet (workers take one every <code>history.intervalMs</code>, 10 ' +
      's by default)</p></div>'
    );
  }
  const frame = frameOf(h);
  const of = (pick: (s: HistorySample) => Value) => samples.map(pick);
  const charts = [
    chart(h, frame, 'pending', [{ label: 'pending', kind: 'pending', values: of((s) => s.pending) }], count, true),
    chart(
      h,
      frame,
      'in flight · retrying',
      [
        { label: 'in flight', kind: 'inflight', values: of((s) => s.inFlight) },
        { label: 'retrying', kind: 'retrying', values: of((s) => s.retrying) },
      ],
      count,
      false,
    ),
    chart(h, frame, 'dead', [{ label: 'dead', kind: 'dead', values: of((s) => s.dead) }], count, false),
    chart(h, frame, 'lag', [{ label: 'lag', kind: 'lag', values: of((s) => s.oldestPendingAgeMs) }], formatMs, true),
    chart(h, frame, 'ids/s', [{ label: 'ids/s', kind: 'rate', values: of((s) => s.idsPerSec) }], count, false),
  ].join('');
  const partial = samples.some((s) => s.truncated)
    ? '<p class="warn">Some samples read only the first 10,000 keys: their totals are partial.</p>'
    : '';
  return `<div class="history"><div class="charts">${charts}</div>${partial}${sparkTable(h, frame)}</div>`;
}

export const CHART_STYLE =
  '.history{margin-top:12px}.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:12px}' +
  // A column whose chart sits at the bottom, so charts line up whatever their captions wrap to.
  'figure.chart{margin:0;background:#f9fafc;border:1px solid #e3e6ec;border-radius:6px;padding:8px 10px;display:flex;' +
  'flex-direction:column}figure.chart svg{margin-top:auto}' +
  'figure.chart figcaption{display:flex;gap:4px 10px;align-items:baseline;flex-wrap:wrap;margin-bottom:4px}.metric{font-weight:600}' +
  'figcaption .now{font-weight:600}.max,.span{color:#5a6478;font-size:12px}.max{margin-left:auto}.span{display:flex;' +
  'justify-content:space-between}' +
  '.trend{font-size:12px}.trend.up{color:#a4262c}.trend.down{color:#2b7a4b}.trend.steady{color:#5a6478}' +
  'svg.chart{display:block;width:100%;height:64px}svg.spark{display:block;width:120px;height:24px}' +
  'svg path.line{fill:none;stroke:currentColor;stroke-width:1.5;stroke-linejoin:round;vector-effect:non-scaling-stroke}svg ' +
  'path.area{fill:currentColor;stroke:none;opacity:.14}' +
  'svg line.axis{stroke:#c9ced8;stroke-width:1;vector-effect:non-scaling-stroke}.swatch{display:inline-block;width:10px;height:3px;' +
  'margin-right:4px;vertical-align:middle;background:currentColor}' +
  '.legend .now{color:#1d2330}table.sparks{width:auto}table.sparks caption{white-space:nowrap}.note{font-weight:400;color:#5a6478}' +
  'table.sparks td{vertical-align:middle;padding-right:16px}' +
  '.k-pending{color:#3b6fd4}.k-inflight{color:#2b9a66}.k-retrying{color:#d08a1a}.k-dead{color:#a4262c}.k-lag{color:#7a4bc2}' +
  '.k-rate{color:#1d7f8c}.k-backlog{color:#3b6fd4}';

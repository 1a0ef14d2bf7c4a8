import { writeFileSync } from 'node:fs';
import type { ScenarioResult } from './scenarios/types';

/** Layout in px. Values span ms to seconds, so the axis is logarithmic. */
const ROW = 34;
const LEFT = 230;
const PLOT = 520;
const TOP = 66;
const COLORS = { p50: '#4c78a8', p99: '#f58518' };

const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

interface Bar {
  label: string;
  p50: number | null;
  p99: number | null;
}

/**
 * A hand-written horizontal bar chart of light-key p50/p99 per system (noisy-neighbour scenario),
 * with a dashed line at the p99 target.
 */
export function latencySvg(scenario: ScenarioResult, subtitle: string, targetP99Ms: number): string {
  const bars: Bar[] = scenario.rows.map((row) => ({
    label: `${String(row.system)} · ${Number(row.backlog).toLocaleString('en-US')} heavy ids`,
    p50: typeof row.p50 === 'number' ? row.p50 : null,
    p99: typeof row.p99 === 'number' ? row.p99 : null,
  }));
  const values = bars.flatMap((b) => [b.p50, b.p99]).filter((v): v is number => v !== null && v > 0);
  const lo = 10 ** Math.floor(Math.log10(Math.min(1, ...values)));
  const hi = 10 ** Math.ceil(Math.log10(Math.max(10, ...values)));
  const x = (ms: number) => LEFT + (Math.log10(Math.max(ms, lo) / lo) / Math.log10(hi / lo)) * PLOT;
  const height = TOP + bars.length * ROW + 50;
  const width = LEFT + PLOT + 90;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
      `font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="20" font-size="15" font-weight="bold">Light-key latency under a noisy neighbour (push → processed)</text>`,
    `<text x="10" y="38" fill="#555">${escape(subtitle)}</text>`,
  ];
  for (let tick = lo; tick <= hi; tick *= 10) {
    const tx = x(tick);
    const label = tick >= 1000 ? `${tick / 1000} s` : `${tick} ms`;
    parts.push(`<line x1="${tx}" y1="${TOP - 6}" x2="${tx}" y2="${TOP + bars.length * ROW}" stroke="#ddd"/>`);
    parts.push(`<text x="${tx}" y="${TOP + bars.length * ROW + 16}" text-anchor="middle" fill="#555">${label}</text>`);
  }
  const targetX = x(targetP99Ms).toFixed(1);
  parts.push(
    `<line x1="${targetX}" y1="${TOP - 6}" x2="${targetX}" y2="${TOP + bars.length * ROW}" stroke="#c00" stroke-dasharray="4 3"/>`,
  );
  parts.push(`<text x="${targetX}" y="${TOP - 9}" text-anchor="middle" fill="#c00" font-size="11">p99 target ${targetP99Ms} ms</text>`);
  bars.forEach((bar, i) => {
    const y = TOP + i * ROW;
    parts.push(`<text x="${LEFT - 8}" y="${y + 17}" text-anchor="end">${escape(bar.label)}</text>`);
    (['p50', 'p99'] as const).forEach((key, j) => {
      const value = bar[key];
      const by = y + 4 + j * 12;
      if (value === null) {
        parts.push(`<text x="${LEFT + 4}" y="${by + 10}" fill="#999">${key}: no data</text>`);
        return;
      }
      parts.push(`<rect x="${LEFT}" y="${by}" width="${Math.max(1, x(value) - LEFT).toFixed(1)}" height="11" fill="${COLORS[key]}"/>`);
      parts.push(
        `<text x="${(x(value) + 4).toFixed(1)}" y="${by + 10}" font-size="11">` +
          `${value < 10 ? value.toFixed(1) : Math.round(value).toLocaleString('en-US')} ms</text>`,
      );
    });
  });
  const legendY = height - 14;
  parts.push(
    `<rect x="${LEFT}" y="${legendY - 10}" width="12" height="11" fill="${COLORS.p50}"/><text x="${LEFT + 16}" y="${legendY}">p50</text>`,
  );
  parts.push(
    `<rect x="${LEFT + 60}" y="${legendY - 10}" width="12" height="11" fill="${COLORS.p99}"/><text x="${LEFT + 76}" y="${legendY}">` +
      `p99</text>`,
  );
  parts.push(`<text x="${LEFT + 120}" y="${legendY}" fill="#555">log scale</text>`, '</svg>');
  return parts.join('\n') + '\n';
}

export function writeLatencySvg(path: string, scenario: ScenarioResult, subtitle: string, targetP99Ms: number): void {
  writeFileSync(path, latencySvg(scenario, subtitle, targetP99Ms));
}

import { writeFileSync } from 'node:fs';
import type { Config } from './config';
import type { Machine } from './lib/machine';
import type { Cell, Column, ScenarioResult } from './scenarios/types';

export interface Results {
  mode: Config['mode'];
  startedAt: string;
  durationSec: number;
  command: string;
  machine: Machine;
  config: Config;
  scenarios: ScenarioResult[];
}

function formatCell(value: Cell | undefined, column: Column): string {
  if (value === null || value === undefined) return '—';
  if (typeof value === 'string') return value;
  if (!Number.isFinite(value)) return '—';
  if (column.digits !== undefined)
    return value.toLocaleString('en-US', { minimumFractionDigits: column.digits, maximumFractionDigits: column.digits });
  return Math.round(value).toLocaleString('en-US');
}

function table(result: ScenarioResult): string[] {
  const numeric = (c: Column) => result.rows.some((r) => typeof r[c.key] === 'number');
  return [
    `| ${result.columns.map((c) => c.label).join(' | ')} |`,
    `|${result.columns.map((c) => (numeric(c) ? '---:' : '---')).join('|')}|`,
    ...result.rows.map((row) => `| ${result.columns.map((c) => formatCell(row[c.key], c)).join(' | ')} |`),
  ];
}

const formatRatio = (value: number | null) =>
  value === null ? 'n/a (a run is missing or timed out)' : value >= 10 ? value.toFixed(0) : value.toFixed(2);

export function markdown(results: Results): string {
  const m = results.machine;
  const lines = [
    `## batch-by-key benchmarks (${results.mode} mode)`,
    '',
    `${m.cpu}, ${m.cores} cores, ${m.memoryGb} GB; ${m.os}; Node ${m.node}; Redis ${m.redis} (${m.redisSource}); ` +
      Object.entries(m.packages)
        .map(([name, version]) => `${name} ${version}`)
        .join(', ') +
      '.',
    `Run: \`${results.command}\`, ${results.durationSec.toFixed(0)} s. Figures come from one run; compare ratios, not absolute figures,` +
      ` across machines.`,
  ];
  for (const s of results.scenarios) {
    lines.push('', `### ${s.title}`, '', s.setup, '', ...table(s));
    if (s.ratios.length) {
      lines.push('', ...s.ratios.map((r) => `- ${r.name}: **${formatRatio(r.value)}**${r.target ? ` (target ${r.target})` : ''}`));
    }
    if (s.notes.length) lines.push('', ...s.notes.map((n) => `_${n}._`));
  }
  return lines.join('\n') + '\n';
}

export function writeResults(path: string, results: Results): void {
  writeFileSync(path, JSON.stringify(results, null, 2) + '\n');
}

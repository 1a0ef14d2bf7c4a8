/**
 * `npm run bench:docs`: writes the benchmark's figures into the docs from bench/results.json (the
 * last full `npm run bench`), so that no figure is copied by hand and none can disagree with the
 * run it comes from. `npm run bench:docs -- --check` (run by `npm run lint`, so CI) fails when a
 * doc is not what the results give.
 *
 * A doc holds a block per place that quotes the bench:
 *
 *     <!-- bench: template -->
 *     (the filled template, written here)
 *     <!-- /bench -->
 *
 * In a template, `{{tables}}` is every scenario's table, ratios and notes; `{{run}}` names the run
 * (command, duration, date); `{{scenario-id|ratio name}}` is that ratio's value, and
 * `{{scenario-id|row system|column label}}` a table cell (the row whose first column is that
 * system), or `{{scenario-id|label=value, label=value|column label}}` where the first column
 * alone names no single row (the row whose columns of those labels hold those values). A name
 * that matches nothing, or more than one row, is an error, so a renamed ratio cannot leave a
 * stale figure. Every doc in DOCS may hold blocks: the README and the guides in docs/.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { format, resolveConfig } from 'prettier';
import { markdown, type Results } from './report';

const ROOT = join(__dirname, '..');
const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.md'))
    .map((file) => `docs/${file}`),
];
const BLOCK = /<!-- bench: ([\s\S]*?) -->\n[\s\S]*?<!-- \/bench -->/g;

const formatRatio = (value: number) => (value >= 10 ? value.toFixed(0) : value.toFixed(2));

function fill(template: string, results: Results): string {
  return template.replace(/\{\{([^}]+)\}\}/g, (_whole, ref: string) => {
    if (ref === 'tables') return markdown(results).split('\n').slice(4).join('\n').trim();
    if (ref === 'run') return `\`${results.command}\`, ${results.durationSec.toFixed(0)} s, ${results.startedAt.slice(0, 10)}`;
    const [id, name, column] = ref.split('|').map((part) => part.trim());
    const scenario = results.scenarios.find((s) => s.id === id);
    if (!scenario) throw new Error(`bench docs: no scenario ${id} in bench/results.json (for {{${ref}}})`);
    if (column === undefined) {
      // A ratio's name may carry a note in parentheses for this run ("… (no target: … did not keep up)").
      const ratio = scenario.ratios.find((r) => r.name === name) ?? scenario.ratios.find((r) => r.name.startsWith(`${name} (`));
      if (!ratio)
        throw new Error(`bench docs: scenario ${id} has no ratio "${name}"; it has: ${scenario.ratios.map((r) => r.name).join('; ')}`);
      if (ratio.value === null) return 'n/a';
      return formatRatio(ratio.value);
    }
    const col = scenario.columns.find((c) => c.label === column);
    const rows = scenario.rows.filter(rowMatcher(scenario, name!));
    if (!col || rows.length !== 1) throw new Error(`bench docs: scenario ${id} has no single cell (${name}, ${column})`);
    const row = rows[0]!;
    const value = row[col.key];
    if (typeof value !== 'number') return String(value ?? 'n/a');
    return value.toLocaleString('en-US', { maximumFractionDigits: col.digits ?? 0, minimumFractionDigits: col.digits ?? 0 });
  });
}

type Scenario = Results['scenarios'][number];

/** `system` (the first column's value), or `label=value, label=value` (each column of that label holds that value). */
function rowMatcher(scenario: Scenario, name: string): (row: Scenario['rows'][number]) => boolean {
  if (!name.includes('=')) {
    const first = scenario.columns[0]!.key;
    return (row) => row[first] === name;
  }
  const conditions = name.split(',').map((part) => {
    const [label, value] = part.split('=').map((s) => s.trim());
    const col = scenario.columns.find((c) => c.label === label);
    if (!col) throw new Error(`bench docs: scenario ${scenario.id} has no column "${label}"`);
    return { key: col.key, value: value! };
  });
  return (row) => conditions.every(({ key, value }) => String(row[key]) === value);
}

async function main(): Promise<void> {
  const check = process.argv.includes('--check');
  const results = JSON.parse(readFileSync(join(__dirname, 'results.json'), 'utf8')) as Results;
  if (results.mode !== 'full') throw new Error('bench/results.json is not a full run: run `npm run bench` first');
  const stale: string[] = [];
  for (const doc of DOCS) {
    const path = join(ROOT, doc);
    const text = readFileSync(path, 'utf8');
    const filled = text.replace(
      BLOCK,
      (_block, template: string) => `<!-- bench: ${template} -->\n${fill(template, results)}\n<!-- /bench -->`,
    );
    const formatted = await format(filled, { ...(await resolveConfig(path)), filepath: path });
    if (formatted === text) continue;
    if (check) stale.push(doc);
    else writeFileSync(path, formatted);
  }
  if (stale.length > 0) {
    console.error(`${stale.join(', ')}: not what bench/results.json gives; run \`npm run bench:docs\``);
    process.exit(1);
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});

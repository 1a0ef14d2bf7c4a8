/**
 * `npx tsx bench/profile-top.ts DIR [N] [FILTER]`: the functions that took a CPU profile's time,
 * for every `.cpuprofile` in DIR (as `BENCH_CPU_PROF_DIR=DIR npm run bench -- --only=…` writes
 * them, one per worker process): the top N (default 30) by self time and by inclusive time (a
 * function with what it called), in per cent of the busy (not idle) time, and the garbage
 * collector's share. FILTER, a regular expression, keeps the inclusive rows whose name or file
 * matches (e.g. 'src/|bullmq|ioredis'). See docs/performance.md, "Profiling".
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const name = (node: ProfileNode): string =>
  `${node.callFrame.functionName || '(anonymous)'} ${node.callFrame.url.replace(/.*node_modules\//, '').replace(/^file:\/\/.*?\/(src|bench|test)\//, '$1/')}:${node.callFrame.lineNumber + 1}`;

function summarize(profile: CpuProfile): { busyUs: number; self: Map<string, number>; inclusive: Map<string, number> } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const time = new Map<number, number>();
  profile.samples.forEach((id, i) => time.set(id, (time.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let busyUs = 0;
  for (const [id, us] of time) {
    const node = byId.get(id)!;
    if (node.callFrame.functionName === '(idle)') continue;
    busyUs += us;
    self.set(name(node), (self.get(name(node)) ?? 0) + us);
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const key = name(byId.get(at)!);
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + us);
    }
  }
  return { busyUs, self, inclusive };
}

function print(title: string, rows: Map<string, number>, busyUs: number, top: number, filter?: RegExp): void {
  console.log(`  ${title}`);
  const sorted = [...rows].filter(([key]) => !filter || filter.test(key)).sort((a, b) => b[1] - a[1]);
  for (const [key, us] of sorted.slice(0, top)) console.log(`  ${((100 * us) / busyUs).toFixed(1).padStart(6)} %  ${key}`);
}

const [dir, topArg, filterArg] = process.argv.slice(2);
if (!dir) {
  console.error('usage: npx tsx bench/profile-top.ts DIR [N] [FILTER]');
  process.exit(2);
}
const top = Number(topArg ?? 30);
for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
  const { busyUs, self, inclusive } = summarize(JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile);
  if (busyUs < 100_000) continue; // a process that did next to nothing (a short-lived helper)
  console.log(
    `${file}: ${(busyUs / 1e6).toFixed(2)} s busy, garbage collector ${((100 * (self.get('(garbage collector) :0') ?? 0)) / busyUs).toFixed(1)} %`,
  );
  print('self time', self, busyUs, top);
  print('inclusive time', inclusive, busyUs, top, filterArg ? new RegExp(filterArg) : undefined);
}

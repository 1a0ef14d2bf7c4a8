import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import * as bullmq from 'bullmq';
import { describe, expect, it } from 'vitest';

/**
 * BullMQ behind one door (src/bullmq/README.md): what we know of BullMQ beyond its documented API
 * (its script names, key names, job-hash fields, private members, argument and reply positions)
 * is written in src/bullmq alone. Every other file under src/, TypeScript and Lua, is read here,
 * its comments left out (prose may tell what BullMQ does), and each place it spells one is named.
 */
const SRC = join(__dirname, '..', 'src');
const DOOR = join(SRC, 'bullmq');

/** BullMQ's public classes: a method of theirs is documented API. */
const CLASSES = [bullmq.Queue, bullmq.Job, bullmq.Worker, bullmq.QueueEvents, bullmq.FlowProducer];

/** The scripts we inline or route, whatever their public namesakes (a Worker's protected moveToActive). */
const ROUTED = ['moveToActive', 'moveToFinished', 'changeDelay', 'moveStalledJobsToWait'];

/**
 * BullMQ's Lua scripts whose names are not public methods of its classes (a public method's name
 * is its documented API), and those of ROUTED.
 */
const SCRIPT_NAMES = (() => {
  const scripts = Object.keys(createRequire(import.meta.url)('bullmq/dist/cjs/scripts') as Record<string, unknown>);
  const isPublic = (name: string) => CLASSES.some((c) => name in c.prototype);
  // Single words (pause, drain, promote) are ours too: only names of several words tell.
  const compound = scripts.filter((name) => /[A-Z]/.test(name) && !isPublic(name));
  return [...new Set([...compound, ...ROUTED])];
})();

/**
 * The suffixes of BullMQ's queue keys (its QueueKeys, with the metrics'). Those that are also
 * its job states or event names (public API: `getJobs(['delayed'])`, `on('completed')`) or
 * plain words of ours count only where a key name is built of them (concatenated).
 */
const SUFFIXES = new Set([...Object.keys(new bullmq.QueueKeys().getKeys('q')).filter((suffix) => suffix !== ''), 'metrics:completed']);
const STATE_OR_WORD = new Set([
  'active',
  'wait',
  'waiting-children',
  'paused',
  'id',
  'delayed',
  'prioritized',
  'completed',
  'failed',
  'stalled',
  'repeat',
  'limiter',
  'events',
]);

/**
 * The fields of a job's hash that BullMQ writes. Those that are plain words (`name`, `data`,
 * `priority`) count only where a job's hash is read in Lua (HGET, HMGET, or a field of a reply).
 */
const JOB_FIELDS = new Set([
  'finishedOn',
  'processedOn',
  'failedReason',
  'returnvalue',
  'stacktrace',
  'attemptsMade',
  'atm',
  'ats',
  'stc',
  'defa',
  'rjk',
]);
const PLAIN_FIELDS = new Set(['name', 'data', 'priority', 'timestamp', 'delay', 'opts']);

/** Members of BullMQ's classes that are not its documented API. */
const PRIVATES = [
  'blockingClient',
  'blockUntil',
  'toKey',
  'execCommand',
  'moveToFinishedKeys',
  'moveToCompletedArgs',
  'processJob',
  'raw2NextJobData',
  'createRedisBackend',
  'processorAcceptsSignal',
];

/** The words of a name: `moveToActive`, `move-to-active` and `MOVE_TO_ACTIVE` are move, to, active. */
const words = (name: string) =>
  name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);

/** The BullMQ script whose name `name` holds (its words in a row), if any; a public method's name holds none. */
function scriptIn(name: string): string | undefined {
  if (!ROUTED.includes(name) && CLASSES.some((c) => name in c.prototype)) return undefined;
  const have = words(name).join(' ');
  return SCRIPT_NAMES.find((script) => ` ${have} `.includes(` ${words(script).join(' ')} `));
}

/**
 * Our own words that are also BullMQ's, each where it is ours. Short, and only what is ours by
 * another meaning, never a BullMQ name a file just happens to need.
 */
const OURS: readonly { file: string; word: string; why: string }[] = [];

interface Token {
  kind: 'string' | 'code';
  text: string;
  line: number;
  /** A string's number in the file: the code holds it as `"#<at>"`. */
  at?: number;
}

/**
 * A source file as its string literals and its code (strings blanked), comments left out, each
 * with its line. Lua's `--- @include "x"` lines are code: an include is named by its string.
 */
function tokens(source: string, lua: boolean): Token[] {
  const out: Token[] = [];
  let line = 1;
  let code = '';
  let codeLine = 1;
  const flush = () => {
    if (code.trim()) out.push({ kind: 'code', text: code, line: codeLine });
    code = '';
  };
  let i = 0;
  let strings = 0;
  const n = source.length;
  while (i < n) {
    const c = source[i]!;
    if (c === '\n') {
      flush();
      line++;
      codeLine = line;
      i++;
      continue;
    }
    const rest = source.startsWith.bind(source);
    if (lua ? rest('--[[', i) : rest('/*', i)) {
      const end = source.indexOf(lua ? ']]' : '*/', i + 2);
      const stop = end === -1 ? n : end + 2;
      line += (source.slice(i, stop).match(/\n/g) ?? []).length;
      i = stop;
      continue;
    }
    if (lua && rest('--- @include ', i)) {
      code += '--- @include ';
      i += '--- @include '.length;
      continue;
    }
    if ((lua && rest('--', i)) || (!lua && rest('//', i))) {
      while (i < n && source[i] !== '\n') i++;
      continue;
    }
    if (c === '"' || c === "'" || c === '`') {
      let j = i + 1;
      let text = '';
      while (j < n && source[j] !== c) {
        if (source[j] === '\\') {
          text += source[j + 1] ?? '';
          j += 2;
          continue;
        }
        if (source[j] === '\n') line++;
        text += source[j];
        j++;
      }
      out.push({ kind: 'string', text, line, at: strings++ });
      code += `"#${strings - 1}"`;
      i = j + 1;
      continue;
    }
    code += c;
    i++;
  }
  flush();
  return out;
}

/** Every place the file `name` (under src/) spells BullMQ in `source`, as `src/<name>:line: what`. */
function leaks(name: string, source: string): string[] {
  const lua = name.endsWith('.lua');
  const ours = new Set(OURS.filter((o) => o.file === name).map((o) => o.word));
  const found: string[] = [];
  const at = (line: number, what: string) => found.push(`src/${name}:${line}: ${what}`);
  const all = tokens(source, lua);
  // A file that speaks to BullMQ (imports the door, or includes or calls what it generates) and
  // indexes a value by a number reads BullMQ's layout there.
  const speaks = lua ? /\bbullmq\w*\b/.test(all.map((t) => t.text).join('\n')) : /from '(\.\.\/)+bullmq'/.test(source);
  const codeOf = new Map(all.filter((t) => t.kind === 'code').map((t) => [t.line, t.text]));
  for (const token of all) {
    if (token.kind === 'string') {
      const code = codeOf.get(token.line) ?? '';
      const place = `"#${token.at}"`;
      const joined = [`.. ${place}`, `${place} ..`, `+ ${place}`, `${place} +`].some((form) => code.replace(/\s+/g, ' ').includes(form));
      const script = scriptIn(token.text);
      if (script) at(token.line, `BullMQ's script ${script} in '${token.text}'`);
      const text = token.text;
      if (ours.has(text)) continue;
      if (SUFFIXES.has(text) && (!STATE_OR_WORD.has(text) || joined)) at(token.line, `BullMQ's key suffix '${text}'`);
      if (JOB_FIELDS.has(text) || (lua && PLAIN_FIELDS.has(text) && /"#\d+"\s*==|==\s*"#\d+"/.test(code) && /\bfield\b/.test(code))) {
        at(token.line, `BullMQ's job field '${text}'`);
      } else if (lua && PLAIN_FIELDS.has(text) && all.some((t) => t.line === token.line && /^HM?GET$/.test(t.text))) {
        at(token.line, `BullMQ's job field '${text}'`);
      }
      continue;
    }
    for (const [word] of token.text.matchAll(/[A-Za-z_$][\w$]*/g)) {
      const script = scriptIn(word);
      if (script) at(token.line, `BullMQ's script ${script} in ${word}`);
      if (PRIVATES.includes(word)) at(token.line, `BullMQ's private ${word}`);
    }
    for (const [, object, member] of token.text.matchAll(/(?<=([\w$]+)\s*\.\s*)([A-Za-z_$][\w$]*)\b(?!\s*\()/g)) {
      if (member === 'drained') at(token.line, "BullMQ's private drained");
      if (member === 'keys' && /queue/i.test(object!)) at(token.line, `BullMQ's queue keys (${object}.keys)`);
      if (SUFFIXES.has(member!) && /(keys|lists)$/i.test(object!)) at(token.line, `BullMQ's key ${object}.${member}`);
    }
    if (speaks) {
      for (const [what] of token.text.matchAll(/\b(args|flat|fields|reply)\[\d+\]/g)) at(token.line, `a position of BullMQ's: ${what}`);
      if (/\b[A-Z_]*(ARG|REPLY)[A-Z_]*\s*=\s*\{\s*\w+:\s*\d+/.test(token.text)) at(token.line, "a table of BullMQ's positions");
    }
  }
  return found;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return path === DOOR ? [] : sources(path);
    return /\.(ts|lua)$/.test(entry.name) ? [path] : [];
  });
}

describe('BullMQ behind one door (src/bullmq)', () => {
  it('no file outside src/bullmq spells a BullMQ script name, key name, job field, private member or position', () => {
    const found = sources(SRC).flatMap((file) => leaks(relative(SRC, file), readFileSync(file, 'utf8')));
    expect(found, 'move each into src/bullmq, behind a named function or a generated Lua accessor').toEqual([]);
  });

  it('finds each kind of place, in code and not in comments (a check that cannot fail proves nothing)', () => {
    const lua = [
      '--- @include "bullmq-move-to-active"',
      "-- BullMQ's 'wait' list, in a comment",
      "if redis.call('LPOS', queue .. 'active', jobId) then return args[7] end",
      'local state = BULLMQ_JOB_LISTS.delayed',
    ].join('\n');
    expect(leaks('x.lua', lua)).toEqual([
      "src/x.lua:1: BullMQ's script moveToActive in 'bullmq-move-to-active'",
      "src/x.lua:3: BullMQ's key suffix 'active'",
      "src/x.lua:3: a position of BullMQ's: args[7]",
      "src/x.lua:4: BullMQ's key BULLMQ_JOB_LISTS.delayed",
    ]);
    const ts = [
      "import { Queue } from '../bullmq';",
      '/* queue.keys.wait */ const marker = queue.keys.marker;',
      'const FINISH_ARG = { jobId: 0, timestamp: 1 };',
      "if (command === 'moveToActive') worker.drained = false;",
      'protected override async processJob(job) { return reply[4]; }',
      'limits.active(); const own = names.paused; // our words',
    ].join('\n');
    expect(leaks('x.ts', ts)).toEqual([
      "src/x.ts:2: BullMQ's queue keys (queue.keys)",
      "src/x.ts:2: BullMQ's key keys.marker",
      "src/x.ts:3: a table of BullMQ's positions",
      "src/x.ts:4: BullMQ's script moveToActive in 'moveToActive'",
      "src/x.ts:4: BullMQ's private drained",
      "src/x.ts:5: BullMQ's private processJob",
      "src/x.ts:5: a position of BullMQ's: reply[4]",
    ]);
  });
});

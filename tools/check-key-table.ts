/**
 * `tsx tools/check-key-table.ts` (part of `npm run lint`, so CI): the table of Redis keys in
 * docs/contributing/internals.md must name exactly the keys src/storage/keys.ts builds, no more and no fewer,
 * so that a key added, renamed or dropped in the code cannot leave the table behind.
 *
 * The table writes a batcher's keys for `prefix`, `name`, a key `E` (its encoded form), a ticket
 * `T`, a lane `n` and `R` for the dead letters' and history's hash tag; `…:x` in a row stands for
 * the row's first name up to its hash tag, followed by `:x`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KEY_SUFFIXES, Keyspace, LANE_NAMES, laneNames, ticketHash, deadLettersOf, JOB_POINTER } from '../src/storage/keys';
import { limitKeys } from '../src/storage/limits-protocol';
import { ShardLayout } from '../src/storage/shards';

const DOC = join(__dirname, '..', 'docs', 'contributing', 'internals.md');

/** Every name keys.ts builds, written as the table writes them. */
function namesInCode(): Set<string> {
  const space = new Keyspace('prefix', 'name');
  const write = (name: string) => name.replace(`{${space.root}}`, '{R}');
  const key = space.forKey('E');
  const names = new Set<string>();
  for (const field of Object.keys(KEY_SUFFIXES) as (keyof typeof KEY_SUFFIXES)[]) {
    if (field !== 'ticketPrefix') names.add(key[field]);
  }
  const ticket = ticketHash(key, 'T');
  names.add(ticket).add(`${ticket}:errors`);
  const lane = laneNames(key, 1);
  for (const field of LANE_NAMES) names.add(lane[field].replace(/:1$/, ':n'));
  const dead = space.dead;
  for (const name of [dead.entries, dead.byTime, dead.byAttempts, dead.evicted, deadLettersOf(dead, 'E')]) names.add(write(name));
  const history = space.history;
  for (const name of [history.series, history.claim, history.processed]) names.add(write(name));
  for (const name of limitKeys(space.limits)) names.add(write(name));
  names.add(space.index).add(space.config).add(space.pausedIndex);
  // The key's job pointer, on BullMQ's queue prefix (`prefix:name:`; see keys.ts jobPointerOf).
  names.add(`prefix:name:${JOB_POINTER}E`);
  // A shard's index, its hash tag written as the table does (see shards.ts shardTag).
  names.add(new ShardLayout('prefix', 'name', space, 2).indexes[0]!.replace(/\{name#[^}]+\}/, '{name#N.i.c}'));
  return names;
}

/** Every key name the table of "## Redis keys" writes, with `…:x` expanded. */
function namesInDoc(): Set<string> {
  const text = readFileSync(DOC, 'utf8');
  const section = text.slice(text.indexOf('## Redis keys'), text.indexOf('\n## ', text.indexOf('## Redis keys') + 1));
  const rows = section.split('\n').filter((line) => line.startsWith('| `'));
  if (rows.length === 0) throw new Error('docs/contributing/internals.md: no table under "## Redis keys"');
  const names = new Set<string>();
  for (const row of rows) {
    const tokens = [...row.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
    const first = tokens[0]!;
    if (first === 'prefix:name:*') continue; // BullMQ's own keys
    const base = first.includes('}') ? first.slice(0, first.indexOf('}') + 1) : first.slice(0, first.lastIndexOf(':'));
    for (const token of tokens) {
      if (token.startsWith('prefix:name:bbk:')) names.add(token);
      else if (token.startsWith('…:')) names.add(base + token.slice(1));
    }
  }
  return names;
}

const code = namesInCode();
const doc = namesInDoc();
const missing = [...code].filter((name) => !doc.has(name));
const extra = [...doc].filter((name) => !code.has(name));
if (missing.length > 0 || extra.length > 0) {
  console.error(
    'docs/contributing/internals.md, "Redis keys": the table does not match src/storage/keys.ts\n' +
      (missing.length > 0 ? `  built by the code, missing from the table:\n    ${missing.join('\n    ')}\n` : '') +
      (extra.length > 0 ? `  in the table, built by no code:\n    ${extra.join('\n    ')}\n` : ''),
  );
  process.exit(1);
}
console.log(`key table: the ${code.size} key names of src/storage/keys.ts, as docs/contributing/internals.md lists them`);

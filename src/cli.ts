#!/usr/bin/env node
import { createReadStream, statSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { createBatcher } from './batcher';
import { commandClient, fromUrl, redactUrl, type RedisClient } from './core/connection';
import { formatMs } from './ops/html';
import { describeLimits, parseConcurrencyInput, parseRateInput } from './ops/limits';
import { BatchByKeyError, InvalidOptionError, StoreMismatchError } from './core/errors';
import { silentLogger } from './core/logger';
import { VERSION } from './core/version';
import { DEFAULTS, resolveOptions, STORES } from './options';
import { recordedShardCounts, recordedStore } from './storage/agreement';
import { Keyspace } from './storage/keys';
import type {
  Batcher,
  DeadLetter,
  DeadLetterQuery,
  KeyInFlight,
  KeyStats,
  PausedKey,
  PendingOptions,
  PendingPage,
  RateLimit,
  Stats,
  StoreKind,
} from './core/types';

/** Exit codes: scripts can tell a bad command line from a failure at run time. */
const EXIT = { ok: 0, runtime: 1, usage: 2 } as const;

/** The longest the CLI waits for Redis to connect, and then for each command's answer. */
const REDIS_WAIT_MS = 5_000;

/** Lines pushed per performBatchLater call (it chunks further inside its one script call). */
const PUSH_BATCH = 10_000;
/** Below this many bytes of input no progress bar is drawn. */
const PROGRESS_MIN_BYTES = 1 << 20;

class UsageError extends Error {}

interface Io {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  stdin: NodeJS.ReadableStream;
}

interface Global {
  redis: string;
  name: string;
  prefix?: string;
  /** Given: it must be the store Redis records for the batcher (see `storeOf`). */
  store?: StoreKind;
  debug?: boolean;
}

const positive = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
};
const nonNegative = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('must be an integer >= 0');
  return n;
};
const list = (value: string): string[] => value.split(',').filter((id) => id !== '');
/** An input parser of ops/limits.ts as commander's: 'off' is kept as it is (commander drops a parser's null). */
const offOr =
  <T>(parse: (text: string) => T | null) =>
  (value: string): T | 'off' => {
    try {
      return parse(value) ?? 'off';
    } catch (err) {
      throw new InvalidArgumentError((err as Error).message);
    }
  };

/**
 * The batcher's store, as its producers and workers recorded it in Redis (see agreement.ts). A
 * `--store` may only confirm it: a wrong one would read with the wrong commands (WRONGTYPE) or
 * push ids in the wrong shape. With nothing recorded (the batcher never pushed nor ran), it is
 * `--store` or the default, as for any batcher, and a push records it.
 */
async function storeOf(global: Global, client: RedisClient, configKey: string): Promise<StoreKind> {
  const recorded = await recordedStore(client, configKey);
  if (recorded === undefined) return global.store ?? DEFAULTS.store;
  if (!STORES.includes(recorded as StoreKind)) {
    throw new Error(`Redis records store '${recorded}' for batcher ${global.name} (in ${configKey}), which this version does not know`);
  }
  if (global.store !== undefined && global.store !== recorded) {
    throw new StoreMismatchError(
      `--store ${global.store} disagrees with the store recorded for batcher ${global.name}: '${recorded}' (in ${configKey}); ` +
        'leave --store out to use it',
    );
  }
  return recorded as StoreKind;
}

/** SCAN calls (of COUNT 1000) made at most to list the batchers in Redis, so a large keyspace still answers soon. */
const SCAN_CALLS = 200;
/** A batcher's config key (storage/keys.ts): `<prefix>:<name>:bbk:config`; a name holds no ':'. */
const CONFIG_KEY = /^(.*):([^:]+):bbk:config$/;

/** Whether a process of the batcher pushed or ran here (its config), or a key was paused or dead-lettered before that. */
async function hasRecorded(client: RedisClient, keyspace: Keyspace): Promise<boolean> {
  const names = [keyspace.config, keyspace.pausedIndex, keyspace.dead.entries];
  // One key a call: names in other slots are one CROSSSLOT error away from a multi-key EXISTS.
  return (await Promise.all(names.map((name) => client.exists(name)))).some((n) => n > 0);
}

/**
 * What the CLI says when the batcher named has recorded nothing in Redis (no producer or worker of
 * that name and prefix ever ran there: a typo, or another prefix), with the batchers it finds there.
 */
async function nothingMatched(client: RedisClient, global: Global, prefix: string): Promise<string> {
  const found = new Set<string>();
  let cursor = '0';
  let calls = 0;
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', '*:bbk:config', 'COUNT', 1000);
    for (const key of keys) {
      const [, theirs = '', name = ''] = CONFIG_KEY.exec(key) ?? [];
      found.add(theirs === prefix.replace(/[{}]/g, '') ? name : `${name} (prefix ${theirs})`);
    }
    cursor = next;
    calls += 1;
  } while (cursor !== '0' && calls < SCAN_CALLS);
  const where = `Redis at ${redactUrl(global.redis)} (prefix ${prefix})`;
  const partly = cursor === '0' ? '' : ` (in the first ${SCAN_CALLS * 1000} keys scanned)`;
  const others = found.size > 0 ? `batchers found there${partly}: ${[...found].sort().join(', ')}` : `no batcher found there${partly}`;
  return `batch-by-key: nothing matched: no batcher named ${global.name} has recorded anything in ${where}; ${others}\n`;
}

/** A producer on the batcher (the CLI never runs slices: it pushes, reads and moves dead letters), on one connection. */
async function withBatcher<T>(global: Global, run: (b: Batcher) => Promise<T>, notice?: (text: string) => void): Promise<T> {
  // Fail fast on a bad URL or a server that is down, instead of retrying forever; and on one that
  // takes the connection but answers nothing (stopped, paused), whose commands would wait for ever.
  const connection = {
    ...fromUrl(global.redis),
    maxRetriesPerRequest: 1,
    retryStrategy: () => null,
    connectTimeout: REDIS_WAIT_MS,
    commandTimeout: REDIS_WAIT_MS,
  };
  const options = { name: global.name, connection, ...(global.prefix !== undefined && { prefix: global.prefix }) };
  // A bad name or prefix is refused before anything reaches Redis.
  const { prefix } = resolveOptions(options);
  const { client } = commandClient(connection, silentLogger);
  let failed = false;
  try {
    const keyspace = new Keyspace(prefix, global.name);
    const configKey = keyspace.config;
    // Said before the answer, which still comes (zero counts, no letters): a fresh batcher has those too.
    if (notice && !(await hasRecorded(client, keyspace))) notice(await nothingMatched(client, global, prefix));
    const store = await storeOf(global, client, configKey);
    // Reads cover every recorded shard count whatever this one is; a push (a dead letter's
    // requeue) goes by the largest, the one a change of `shards` most likely moved to.
    const shards = Math.max(1, ...(await recordedShardCounts(client, configKey)));
    const b = createBatcher({ ...options, connection: client, store, shards }, undefined);
    try {
      return await run(b);
    } finally {
      await b.close().catch(() => undefined);
    }
  } catch (err) {
    failed = true;
    throw err;
  } finally {
    // The batcher leaves a client it was given open. One that is not ready has nothing to flush,
    // nor one after a failure: the error is reported, and a Redis that did not answer would keep
    // the QUIT waiting REDIS_WAIT_MS more.
    if (client.status === 'ready' && !failed) await client.quit().catch(() => client.disconnect());
    else client.disconnect();
  }
}

/** C0 and C1 control characters, and DEL: what must not reach a terminal or split a line or field raw. */
// eslint-disable-next-line no-control-regex -- control characters are what this looks for
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * A key as the shell takes it back after --key: bare when it is plain, in single quotes when it
 * holds spaces or shell characters, and in bash's and zsh's $'…' when it holds control characters
 * (a tab, a newline), so one key stays one line and one field, leading spaces and all.
 */
export function shellQuote(key: string): string {
  if (/^[A-Za-z0-9._:@%+=,/-]+$/.test(key)) return key;
  if (!CONTROL.test(key)) return `'${key.replace(/'/g, `'\\''`)}'`;
  const escaped = [...key]
    .map((c) => {
      const code = c.codePointAt(0)!;
      if (c === '\\') return '\\\\';
      if (c === "'") return "\\'";
      if (c === '\n') return '\\n';
      if (c === '\t') return '\\t';
      if (c === '\r') return '\\r';
      if (code < 0x20 || code === 0x7f) return `\\x${code.toString(16).padStart(2, '0')}`;
      // A C1 control (U+0080-U+009F; U+009B is a CSI to many terminals), as the character, not the byte `\x` would write.
      return code >= 0x80 && code <= 0x9f ? `\\u${code.toString(16).padStart(4, '0')}` : c;
    })
    .join('');
  return `$'${escaped}'`;
}

/**
 * Free text (an error's name or message) as it is when it holds no control character, else in
 * bash's `$'…'` as `shellQuote` writes it: a newline or a tab in it forges no line or field, and
 * an ESC reaches no terminal.
 */
function printable(text: string): string {
  return CONTROL.test(text) ? shellQuote(text) : text;
}

function deadLine(l: DeadLetter): string {
  const { key, id, attempts, lastFailedAt, error } = l;
  return `${shellQuote(key)}\t${shellQuote(id)}\t${attempts}\t${new Date(lastFailedAt).toISOString()}\t${printable(error.name)}: ${printable(error.message)}`;
}

function keyLine(k: KeyStats): string {
  return `  ${shellQuote(k.key)}  pending ${k.pending}  in flight ${k.inFlight}  retrying ${k.retrying}  lag ${formatMs(k.oldestPendingAgeMs)}`;
}

function pausedLine(p: PausedKey): string {
  return `  ${shellQuote(p.key)}\t${p.untilMs === undefined ? 'until resumed' : `until ${new Date(p.untilMs).toISOString()}`}`;
}

function formatStats(s: Stats): string {
  const lines = [
    `${s.name}: ${s.keys} keys, ${s.pending} pending, ${s.inFlight} in flight, ${s.retrying} retrying, ${s.dead} dead, lag ` +
      `${formatMs(s.oldestPendingAgeMs)}`,
  ];
  if (s.truncated) lines.push(`  (only the first ${s.scannedKeys} indexed keys were read: raise --max-keys)`);
  if (s.topKeys.length > 0) lines.push('top keys by backlog:', ...s.topKeys.map(keyLine));
  if (s.laggingKeys.length > 0) lines.push('top keys by lag:', ...s.laggingKeys.map(keyLine));
  if (s.paused.length > 0) lines.push('paused keys:', ...s.paused.map(pausedLine));
  if (s.limits.rate || s.limits.concurrency || s.limits.heldMs > 0) lines.push(`limits: ${describeLimits(s.limits)}`);
  return `${lines.join('\n')}\n`;
}

const idList = (ids: readonly string[]): string => ids.map(shellQuote).join(' ');

/** `keys show`: the key's counts, its running and retrying slices, and a page of its pending ids, each id quoted. */
function formatKey(key: string, page: PendingPage, held: KeyInFlight): string {
  const inFlight = held.running.reduce((n, slice) => n + slice.ids.length, 0);
  const retrying = held.retrying.reduce((n, slice) => n + slice.ids.length, 0);
  const lines = [
    `${shellQuote(key)}: pending ${page.high + page.normal} (high ${page.high}, normal ${page.normal}), in flight ${inFlight}, retrying ${retrying}`,
  ];
  if (held.running.length > 0)
    lines.push('running:', ...held.running.map((r) => `  lane ${r.lane}	attempt ${r.attempt}${r.high ? '	high' : ''}	${idList(r.ids)}`));
  if (held.retrying.length > 0)
    lines.push(
      'retrying:',
      ...held.retrying.map((r) => `  ${shellQuote(r.sliceId)}	attempts ${r.attempts}	due ${new Date(r.dueAt).toISOString()}	${idList(r.ids)}`),
    );
  lines.push(`pending (${page.ids.length} listed, in the order they will run):`);
  for (const p of page.ids) {
    const ready = p.readyAt === undefined ? '' : `	ready ${new Date(p.readyAt).toISOString()}`;
    const data = p.payloads.length === 0 ? '' : `	${printable(JSON.stringify(p.payloads))}`;
    lines.push(`  ${shellQuote(p.id)}	${p.level}${ready}${data}`);
  }
  if (page.next)
    lines.push('offset' in page.next ? `more: --offset ${page.next.offset}` : `more: --cursor ${shellQuote(page.next.cursor)}`);
  return `${lines.join('\n')}\n`;
}

/**
 * Calls `onLine` with each line of the input as it is, as the library takes ids: a line ends at
 * `\n`, a `\r` just before it goes too (CRLF files), and nothing else is stripped (spaces, tabs,
 * a lone `\r` are the id's). Empty lines are skipped; the last line needs no `\n`.
 */
async function readLines(
  io: Io,
  file: string | undefined,
  onLine: (line: string) => Promise<void>,
  progress: (bytes: number, total: number) => void,
): Promise<void> {
  const total = file ? statSync(file).size : 0;
  const input: NodeJS.ReadableStream = file ? createReadStream(file) : io.stdin;
  // A character split over two chunks is decoded whole.
  const decoder = new StringDecoder('utf8');
  const emit = async (line: string) => {
    if (line !== '') await onLine(line);
  };
  let bytes = 0;
  let partial = '';
  for await (const chunk of input as AsyncIterable<Buffer | string>) {
    bytes += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
    progress(bytes, total);
    const text = partial + (typeof chunk === 'string' ? chunk : decoder.write(chunk));
    let start = 0;
    for (let end = text.indexOf('\n'); end !== -1; start = end + 1, end = text.indexOf('\n', start)) {
      await emit(text.slice(start, end > start && text[end - 1] === '\r' ? end - 1 : end));
    }
    partial = text.slice(start);
  }
  await emit(partial + decoder.end());
}

function progressBar(io: Io): { update: (bytes: number, total: number, pushed: number) => void; done: () => void } {
  let drawn = false;
  const draw = (bytes: number, total: number, pushed: number) => {
    if (!io.stderr.isTTY || Math.max(bytes, total) < PROGRESS_MIN_BYTES) return;
    drawn = true;
    const width = 30;
    const bar =
      total > 0 ? `[${'#'.repeat(Math.round((width * bytes) / total)).padEnd(width)}] ${Math.floor((100 * bytes) / total)}% ` : '';
    io.stderr.write(`\r${bar}${pushed} ids pushed`);
  };
  return { update: draw, done: () => drawn && io.stderr.write('\n') };
}

function program(io: Io): Command {
  const out = (text: string) => io.stdout.write(text);
  const cli = new Command('batch-by-key')
    .description('Inspect and steer a batch-by-key batcher')
    .addOption(new Option('--redis <url>', 'Redis URL').env('REDIS_URL').default('redis://127.0.0.1:6379'))
    .requiredOption('--name <name>', 'the batcher name (its BullMQ queue)')
    .option('--prefix <prefix>', 'BullMQ key prefix, if the batcher sets one')
    .addOption(
      new Option('--store <store>', "the batcher's store: read from Redis, where its processes record it; given, it must agree").choices(
        STORES,
      ),
    )
    .option('--debug', 'print stack traces of errors')
    .version(VERSION)
    .exitOverride()
    .configureOutput({ writeOut: out, writeErr: (text) => io.stderr.write(text) })
    .showHelpAfterError();
  const global = () => cli.opts<Global>();
  // Every command that reads says when its name matched nothing; push and pause may well come first.
  const notice = (text: string) => io.stderr.write(text);

  cli
    .command('stats')
    .description('totals, lag and the busiest keys')
    .option('--watch [ms]', 'print again every ms (default 2000) until interrupted')
    .option('--json', 'print JSON')
    .option('--max-keys <n>', 'keys read at most', positive)
    .option('--top <n>', 'keys listed by backlog and by lag', positive)
    .action(async (o: { watch?: string | true; json?: boolean; maxKeys?: number; top?: number }) => {
      const every = o.watch === undefined ? undefined : o.watch === true ? 2000 : positive(o.watch);
      await withBatcher(
        global(),
        async (b) => {
          const options = { ...(o.maxKeys && { maxKeys: o.maxKeys }), ...(o.top && { top: o.top }) };
          for (;;) {
            const s = await b.stats(options);
            out(o.json ? `${JSON.stringify(s)}\n` : `${every !== undefined ? `${new Date(s.at).toISOString()} ` : ''}${formatStats(s)}`);
            if (every === undefined) return;
            await new Promise((resolve) => setTimeout(resolve, every));
          }
        },
        notice,
      );
    });

  const dead = cli.command('dead').description('dead letters');
  const query = (o: { key?: string; ids?: string[] }): DeadLetterQuery => ({
    ...(o.key !== undefined && { key: o.key }),
    ...(o.ids && { ids: o.ids }),
  });
  dead
    .command('list')
    .description('list dead letters, most recent first')
    .option('--key <key>', 'only this key')
    .option('--limit <n>', 'at most this many (up to 1000)', positive, 100)
    .addOption(new Option('--order <order>', 'time (most recent) or attempts (most)').choices(['time', 'attempts']).default('time'))
    .option('--json', 'print JSON lines')
    .action(async (o: { key?: string; limit: number; order: 'time' | 'attempts'; json?: boolean }) => {
      await withBatcher(
        global(),
        async (b) => {
          const { letters } = await b.deadLetters.list({ limit: o.limit, order: o.order, ...(o.key !== undefined && { key: o.key }) });
          for (const l of letters) {
            out(o.json ? `${JSON.stringify(l)}\n` : `${deadLine(l)}\n`);
          }
        },
        notice,
      );
    });
  dead
    .command('requeue')
    .description('push dead ids back and remove their letters (all of them unless --key/--ids)')
    .option('--key <key>', 'only this key')
    .option('--ids <ids>', 'only these ids, comma-separated', list)
    .action(async (o: { key?: string; ids?: string[] }) => {
      const n = await withBatcher(global(), (b) => b.deadLetters.requeue(query(o)), notice);
      out(`requeued ${n}\n`);
    });
  dead
    .command('purge')
    .description('delete dead letters for good')
    .option('--key <key>', 'only this key')
    .option('--ids <ids>', 'only these ids, comma-separated', list)
    .option('--yes', 'needed to purge every letter of the batcher')
    .action(async (o: { key?: string; ids?: string[]; yes?: boolean }) => {
      if (o.key === undefined && o.ids === undefined && !o.yes)
        throw new UsageError('dead purge without --key or --ids deletes every dead letter: add --yes');
      const n = await withBatcher(global(), (b) => b.deadLetters.purge(query(o)), notice);
      out(`purged ${n}\n`);
    });

  cli
    .command('keys')
    .description('one key at a time')
    .command('show <key>')
    .description("a key's counts, the slices it runs and retries, and a page of its pending ids in the order they will run")
    .addOption(new Option('--level <level>', 'only this level (default: both, high first)').choices(['high', 'normal']))
    .option('--offset <n>', 'list and zset stores: start at this position', nonNegative)
    .option('--cursor <cursor>', "set store: continue where the last page stopped (its 'more: --cursor')")
    .option('--limit <n>', 'pending ids listed at most (up to 1000)', positive, 100)
    .option('--json', 'print JSON')
    .action(async (key: string, o: PendingOptions & { json?: boolean }) => {
      const { json, ...options } = o;
      const [page, held] = await withBatcher(global(), async (b) => Promise.all([b.pending(key, options), b.inFlight(key)]), notice);
      out(json ? `${JSON.stringify({ key, pending: page, ...held })}\n` : formatKey(key, page, held));
    });

  cli
    .command('pause')
    .description('pause a key: its ids are kept, nothing of it runs (a running slice finishes first)')
    .requiredOption('--key <key>', 'the key to pause')
    .option('--for <ms>', 'end the pause by itself after this many ms (default: until resume)', positive)
    .action(async (o: { key: string; for?: number }) => {
      await withBatcher(global(), (b) => b.pause(o.key, o.for === undefined ? {} : { forMs: o.for }));
      out(`paused ${o.key}${o.for === undefined ? '' : ` for ${formatMs(o.for)}`}\n`);
    });
  cli
    .command('resume')
    .description("end a key's pause; its job starts at once if it has ids")
    .requiredOption('--key <key>', 'the key to resume')
    .action(async (o: { key: string }) => {
      await withBatcher(global(), (b) => b.resume(o.key), notice);
      out(`resumed ${o.key}\n`);
    });
  cli
    .command('drop')
    .description("delete a key's whole backlog (pending, in flight, retrying): its tickets count the ids as dropped")
    .requiredOption('--key <key>', 'the key to drop')
    .option('--dead-letters', "also delete the key's dead letters")
    .option('--yes', 'needed: without it, only says what would be dropped')
    .option('--json', 'print JSON')
    .action(async (o: { key: string; deadLetters?: boolean; yes?: boolean; json?: boolean }) => {
      const dropped = await withBatcher(
        global(),
        async (b) => {
          if (!o.yes) {
            const { pending, inFlight, retrying } = await b.backlog(o.key);
            const letters = o.deadLetters ? `, ${await b.deadLetters.count({ key: o.key })} dead letters` : '';
            throw new UsageError(
              `drop would delete from key ${shellQuote(o.key)} ${pending} pending, ${inFlight} in flight and ${retrying} retrying ids${letters}: add --yes`,
            );
          }
          return b.drop(o.key, { deadLetters: o.deadLetters === true });
        },
        notice,
      );
      out(
        o.json
          ? `${JSON.stringify(dropped)}\n`
          : `dropped ${shellQuote(o.key)}: ${dropped.pending} pending, ${dropped.inFlight} in flight, ${dropped.retrying} retrying, ` +
              `${dropped.tickets} tickets, ${dropped.deadLetters} dead letters\n`,
      );
    });
  cli
    .command('paused')
    .description('list the keys paused now')
    .option('--json', 'print JSON lines')
    .action(async (o: { json?: boolean }) => {
      const keys = await withBatcher(global(), (b) => b.paused(), notice);
      for (const p of keys) out(o.json ? `${JSON.stringify(p)}\n` : `${pausedLine(p).trimStart()}\n`);
    });

  const limits = cli.command('limits').description('the batcher-wide limits (globalRateLimit, globalConcurrency)');
  // A name with no trace in Redis (a typo, another prefix) is refused: `show` would print "unlimited"
  // as if that were the answer, and `set` would record limits for a batcher nobody runs.
  let untraced: string | undefined;
  const traceOf = (text: string) => void (untraced = text.replace(/^batch-by-key: /, '').trimEnd());
  limits
    .command('show')
    .description('the limits in force and their use')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const { limits: l } = await withBatcher(
        global(),
        (b) => {
          if (untraced !== undefined) throw new InvalidOptionError(`no limits are configured for batcher ${global().name}: ${untraced}`);
          return b.stats({ maxKeys: 1, top: 1 });
        },
        traceOf,
      );
      out(o.json ? `${JSON.stringify(l)}\n` : `${describeLimits(l)}\n`);
    });
  limits
    .command('set')
    .description('change the limits for every worker, at run time')
    .option('--rate <max/ms>', "at most max ids per ms across every key, or 'off'", offOr(parseRateInput))
    .option('--concurrency <n>', "at most n slices running at once across every worker, or 'off'", offOr(parseConcurrencyInput))
    .option('--force', 'set them even for a batcher that has recorded nothing in Redis yet (none of its processes has run)')
    .action(async (o: { rate?: RateLimit | 'off'; concurrency?: number | 'off'; force?: boolean }) => {
      const { rate, concurrency } = o;
      if (rate === undefined && concurrency === undefined) throw new UsageError('limits set needs --rate or --concurrency');
      await withBatcher(
        global(),
        async (b) => {
          if (untraced !== undefined && !o.force) {
            throw new InvalidOptionError(
              `${untraced}; limits set would record limits for a batcher nobody runs: check --name and --prefix, or add --force`,
            );
          }
          if (untraced !== undefined) notice(`batch-by-key: ${untraced}; setting the limits anyway (--force)\n`);
          if (rate !== undefined) await b.setGlobalRateLimit(rate === 'off' ? null : rate);
          if (concurrency !== undefined) await b.setGlobalConcurrency(concurrency === 'off' ? null : concurrency);
        },
        traceOf,
      );
      out(
        [
          rate !== undefined && `rate ${rate === 'off' ? rate : `${rate.max} ids per ${formatMs(rate.durationMs)}`}`,
          concurrency !== undefined && `concurrency ${concurrency}`,
        ]
          .filter(Boolean)
          .join(', ') + '\n',
      );
    });

  cli
    .command('recover')
    .description('add a job for every key that has ids but no job; --full looks at every key in Redis (SCAN), for jobs removed by hand')
    .option('--full', "look at every key in Redis, not only those the batcher's recovery index lists")
    .action(async (o: { full?: boolean }) => {
      const recovered = await withBatcher(global(), (b) => b.recover({ full: o.full === true }));
      out(`${recovered} keys got a job\n`);
    });

  cli
    .command('push')
    .description('push ids, one per line, from a file or stdin')
    .requiredOption('--key <key>', 'the key to push to')
    .option('--file <path>', 'read ids from this file instead of stdin')
    .action(async (o: { key: string; file?: string }) => {
      const bar = progressBar(io);
      const pushed = await withBatcher(global(), async (b) => {
        let batch: string[] = [];
        let count = 0;
        let bytes = 0;
        let total = 0;
        const flush = async () => {
          if (batch.length === 0) return;
          count += (await b.performBatchLater(batch, { key: o.key })).pushed;
          batch = [];
          bar.update(bytes, total, count);
        };
        await readLines(
          io,
          o.file,
          async (id) => {
            batch.push(id);
            if (batch.length >= PUSH_BATCH) await flush();
          },
          (read, size) => {
            bytes = read;
            total = size;
          },
        );
        await flush();
        return count;
      });
      bar.done();
      out(`pushed ${pushed} ids to ${o.key}\n`);
    });
  return cli;
}

function isUsage(err: unknown): boolean {
  if (err instanceof UsageError || err instanceof CommanderError) return true;
  // Bad input that reached the library: a key, id or option it refuses.
  return (
    err instanceof BatchByKeyError &&
    ['ERR_INVALID_OPTION', 'ERR_INVALID_IDS', 'ERR_INVALID_KEY', 'ERR_NOT_PAUSED', 'ERR_STORE_MISMATCH'].includes(err.code)
  );
}

/** Runs the CLI; resolves with the exit code. */
export async function main(argv: readonly string[], io: Io = process): Promise<number> {
  const cli = program(io);
  try {
    await cli.parseAsync(argv);
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end this way too, with exit code 0.
      return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    const { debug, redis } = cli.opts<Global>();
    const message = err instanceof Error ? err.message : String(err);
    const unreachable = !(err instanceof BatchByKeyError) && /Connection is closed|ECONNREFUSED|ENOTFOUND|ETIMEDOUT|connect/i.test(message);
    // ioredis' commandTimeout: Redis took the connection but did not answer (stopped, paused, busy).
    const silent = !(err instanceof BatchByKeyError) && /^Command timed out$/.test(message);
    io.stderr.write(
      `batch-by-key: ${
        silent
          ? `Redis at ${redactUrl(redis)} did not answer within ${formatMs(REDIS_WAIT_MS)} (${message})`
          : unreachable
            ? `cannot reach Redis at ${redactUrl(redis)} (${message})`
            : message
      }\n`,
    );
    if (debug && err instanceof Error && err.stack) io.stderr.write(`${err.stack}\n`);
    return isUsage(err) ? EXIT.usage : EXIT.runtime;
  }
}

if (require.main === module) {
  const stop = () => process.exit(EXIT.ok);
  process.on('SIGINT', stop);
  void main(process.argv).then((code) => {
    process.exitCode = code;
    // After a failure nothing is left to do, but a connection Redis never answered (stopped,
    // paused) keeps its socket open until its idle timeout: exit once what was written is flushed.
    if (code !== EXIT.ok) process.stdout.write('', () => process.stderr.write('', () => process.exit(code)));
  });
}

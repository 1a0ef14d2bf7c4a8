/** A script argument as ioredis sends it (BullMQ's packed options are a Buffer). */
export type ScriptArg = string | number | Buffer;

/**
 * A script's arguments by name, in ARGV order: the one place their positions are written. The
 * Lua side reads them through a generated include (`--- @include "args-<script>"` defines
 * `<script>Args()`, see `argsInclude`), the TypeScript side builds ARGV with `argv`, so neither
 * counts positions by hand, as the `keyspace` include does for key names.
 *
 * - `str`: sent and read as a string;
 * - `int`: a number, read with `tonumber`;
 * - `flag`: a boolean, sent as '1' or '0', read as `== '1'`.
 *
 * A schema with `rest` takes a variadic tail after its named arguments (BullMQ's own arguments,
 * say): its Lua table carries `rest`, the index in ARGV where the tail starts.
 */
type Kind = 'str' | 'int' | 'flag';

type Fields = Readonly<Record<string, Kind>>;

interface Schema<F extends Fields> {
  /**
   * How the script reads them: a function the include defines, which returns them as a table
   * (`claimArgs` for `claim`: for scripts that hand them on), or `locals`: the include, placed in
   * the script's body, declares one local per argument (its name prefixed `arg_`), the cheapest
   * form, for a hot script that only reads them (a 16-field table cost a push about 1.5 µs).
   */
  readonly lua: string;
  readonly fields: F;
  /** Whether a variadic tail follows the named arguments. */
  readonly rest: boolean;
}

type Value<K extends Kind> = K extends 'flag' ? boolean : K extends 'int' ? number : string;

/** The values a schema's builder takes: each named argument, typed by its kind. */
export type ArgValues<F extends Fields> = { readonly [N in keyof F]: Value<F[N]> };

function schema<F extends Fields>(lua: string, fields: F, rest = false): Schema<F> {
  return { lua, fields, rest };
}

/** A claim of one key (claim.lua), and the first part of a claim that finishes its run's job. */
const CLAIM = {
  store: 'str',
  lock: 'str',
  claimId: 'str',
  settle: 'str',
  count: 'int',
  lane: 'int',
  lockTtlMs: 'int',
  takeLock: 'flag',
  releaseIfEmpty: 'flag',
  rateMax: 'int',
  rateWindowMs: 'int',
  holdMs: 'int',
  // Wait to fill: the key's minSliceSize (1: no wait) and maxWaitMs (see includes/fill.lua).
  fillMin: 'int',
  fillMaxWaitMs: 'int',
} as const satisfies Fields;

/**
 * What a fetched key job's first claim needs beside the key (see includes/fused-claim.lua): the
 * same for every key a worker fetches.
 */
const FIRST_CLAIM = {
  store: 'str',
  root: 'str',
  lock: 'str',
  count: 'int',
  lockTtlMs: 'int',
  releaseIfEmpty: 'flag',
  rateMax: 'int',
  rateWindowMs: 'int',
  fillMin: 'int',
  fillMaxWaitMs: 'int',
} as const satisfies Fields;

/** Every script whose arguments are declared here, by script name: each one with more than two. */
export const SCRIPT_ARGS = {
  push: schema(
    'locals',
    {
      store: 'str',
      // zset: ms until the ids are ready (0 otherwise).
      delayMs: 'int',
      // '' for an untracked push; how long the ticket lives.
      ticket: 'str',
      ticketTtlMs: 'int',
      // The key (its member in the index) and its score there: now, by the pusher's clock.
      key: 'str',
      indexScore: 'str',
      payloadMode: 'str',
      ticketMode: 'str',
      callback: 'flag',
      queuePrefix: 'str',
      // Which of BullMQ's adds comes with the push (its kind, see job.ts pushAdd), '' for none.
      addJob: 'str',
      // How many of BullMQ's arguments of that add open the tail, before the ids (0: none).
      addArgCount: 'int',
      traceparent: 'str',
      // The key's maxPendingPerKey, 0 for none (see includes/backlog.lua).
      maxPending: 'int',
      // Wait to fill: the key's minSliceSize (1: no wait) and maxWaitMs (see includes/fill.lua).
      fillMin: 'int',
      fillMaxWaitMs: 'int',
      // A push with priority 'high': its ids wait in the key's high store (see includes/priority.lua).
      high: 'flag',
      // How many ids the push wrote before this call, by native commands in its transaction (0: its ids follow).
      stored: 'int',
    } as const,
    true,
  ),
  'due-in': schema('dueInArgs', { store: 'str', fillMin: 'int', fillMaxWaitMs: 'int' } as const),
  'pending-page': schema('pendingPageArgs', { store: 'str', levels: 'str', offset: 'int', cursor: 'str', limit: 'int' } as const),
  'backlog-check': schema('locals', { store: 'str', maxPending: 'int', high: 'flag' } as const, true),
  claim: schema('claimArgs', CLAIM),
  'claim-and-finish': schema(
    'claimAndFinishArgs',
    {
      ...CLAIM,
      // How many of BullMQ's keys follow the key's base in KEYS (-1: none sent, derived from
      // BullMQ's arguments; see finish-job.lua).
      finishKeys: 'int',
      // The lock value for the first claim of the next job BullMQ's completion fetches, if it is
      // a key job ('': none), and the batcher's root its key's base is built from.
      nextLock: 'str',
      root: 'str',
    } as const,
    true,
  ),
  'fetch-and-claim': schema('fetchAndClaimArgs', FIRST_CLAIM, true),
  'add-job': schema('addJobArgs', { add: 'str', queuePrefix: 'str', key: 'str', delayMs: 'int' } as const, true),
  'fail-slice': schema('failSliceArgs', { lock: 'str', plan: 'str', maxTicketErrors: 'int', settleId: 'str', lane: 'int' } as const),
  agree: schema('agreeArgs', {
    storeField: 'str',
    store: 'str',
    shardsField: 'str',
    validForMs: 'int',
    pausedAllField: 'str',
    rateField: 'str',
    rateDefault: 'str',
    concurrencyField: 'str',
    concurrencyDefault: 'str',
  } as const),
  'dead-add': schema(
    'deadAddArgs',
    { encodedKey: 'str', key: 'str', attempts: 'int', firstFailedAt: 'int', lastFailedAt: 'int', error: 'str', count: 'int' } as const,
    true,
  ),
  'limits-enter': schema('limitsEnterArgs', {
    lease: 'str',
    waiter: 'str',
    level: 'int',
    cap: 'int',
    leaseTtlMs: 'int',
    waitBoundMs: 'int',
    need: 'int',
    rateMax: 'int',
    rateWindowMs: 'int',
    settleAt: 'int',
    settleCount: 'int',
  } as const),
  'limits-leave': schema('limitsLeaveArgs', { cap: 'int', rateMax: 'int', rateWindowMs: 'int', need: 'int', settle: 'str' } as const, true),
  'history-tick': schema('historyTickArgs', { processedHere: 'int', intervalMs: 'int', retentionMs: 'int' } as const),
  'history-append': schema('historyAppendArgs', { sample: 'str', intervalMs: 'int', kept: 'int', retentionMs: 'int' } as const),
} as const;

export type ArgsScript = keyof typeof SCRIPT_ARGS;

/** A schema's fields, per script. */
export type ScriptFields<S extends ArgsScript> = (typeof SCRIPT_ARGS)[S]['fields'];

const send = (kind: Kind, value: ScriptArg | boolean): ScriptArg => (kind === 'flag' ? (value ? '1' : '0') : (value as ScriptArg));

/** Each schema's names in order, listed once (a claim is built per slice). */
const ORDER = new Map(Object.entries(SCRIPT_ARGS).map(([script, s]) => [script, Object.entries(s.fields as Fields)]));

/** A script's ARGV: its named arguments in the schema's order, then `rest` (a schema with a tail). */
export function argv<S extends ArgsScript>(script: S, values: ArgValues<ScriptFields<S>>, rest: readonly ScriptArg[] = []): ScriptArg[] {
  const named = values as Readonly<Record<string, ScriptArg | boolean>>;
  const out: ScriptArg[] = [];
  for (const [name, kind] of ORDER.get(script)!) out.push(send(kind, named[name]!));
  for (const arg of rest) out.push(arg);
  return out;
}

/**
 * The `args-<script>` include: `<script>Args()`, a table of the call's named arguments read from
 * ARGV (and `rest`, where its tail starts).
 * @internal (exported for the test that holds it to `argv`)
 */
export function argsInclude(script: string): string {
  const s = (SCRIPT_ARGS as Record<string, Schema<Fields> | undefined>)[script];
  if (!s) throw new Error(`no argument schema for script ${script}`);
  const read = (kind: Kind, i: number) => (kind === 'int' ? `tonumber(ARGV[${i}])` : kind === 'flag' ? `ARGV[${i}] == '1'` : `ARGV[${i}]`);
  const fields = Object.entries(s.fields).map(([name, kind], i) => [name, read(kind, i + 1)] as const);
  if (s.rest) fields.push(['rest', String(fields.length + 1)]);
  if (s.lua === 'locals') {
    return [
      `-- Generated from storage/scripts/args.ts: ${script}.lua's arguments by name.`,
      `local ${fields.map(([name]) => `arg_${name}`).join(', ')} =`,
      `  ${fields.map(([, value]) => value).join(', ')}`,
      '',
    ].join('\n');
  }
  return [
    `-- Generated from storage/scripts/args.ts: ${script}.lua's arguments by name.`,
    `local function ${s.lua}()`,
    `  return { ${fields.map(([name, value]) => `${name} = ${value}`).join(', ')} }`,
    'end',
    '',
  ].join('\n');
}

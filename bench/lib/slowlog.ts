import type { BenchRedis } from './redis';
import { ADMIN_CLIENT_NAME } from './redis';
import { scriptNames } from './scripts';

/** Bounds the log's memory; a profile run that fills it says so (`truncated`). */
const MAX_ENTRIES = 200_000;

export interface CommandProfile {
  /** A Redis command, or "bbk claim" / "bullmq moveToActive" / ... for a script. */
  command: string;
  calls: number;
  /** Time Redis spent executing these calls (a script's whole run, its inner commands included). */
  usec: number;
}

export interface SlowlogProfile {
  commands: CommandProfile[];
  roundTrips: number;
  usec: number;
  truncated: boolean;
}

/**
 * Logs every command from now on. SLOWLOG, unlike INFO commandstats, records only what clients
 * sent (a script once, not its inner calls) with its arguments, so it counts round trips and names
 * each script by its SHA, or its function's name. Only for small profile runs: logging everything slows Redis down.
 */
export async function startSlowlog(redis: BenchRedis): Promise<void> {
  await redis.admin.config('SET', 'slowlog-log-slower-than', '0');
  await redis.admin.config('SET', 'slowlog-max-len', String(MAX_ENTRIES));
  await redis.admin.slowlog('RESET');
}

/** The address SLOWLOG gives the commands a script runs. */
const LUA_CLIENT_ADDR = '?:0';

type Entry = [number, number, number, string[], string, string];

function commandName(args: readonly string[]): string {
  const command = (args[0] ?? '?').toLowerCase();
  if (command === 'evalsha') return scriptNames().get((args[1] ?? '').toLowerCase()) ?? `script ${(args[1] ?? '').slice(0, 8)}`;
  // Ours on Redis 7+: a function of our library, by its name.
  if (command === 'fcall') return scriptNames().get(args[1] ?? '') ?? `function ${args[1] ?? ''}`;
  // ioredis sends a script's body once per connection; SLOWLOG truncates it, so it cannot be hashed.
  if (command === 'eval') return 'eval (first call of a script on a connection)';
  return command;
}

/** Logged entries of the commands clients sent: neither the bench's own nor those scripts ran. Turns logging back down. */
async function clientEntries(redis: BenchRedis): Promise<{ entries: Entry[]; truncated: boolean }> {
  const entries = (await redis.admin.slowlog('GET', '-1')) as Entry[];
  await redis.admin.config('SET', 'slowlog-log-slower-than', '10000');
  // Commands a script runs are logged too, from Lua's fake client ("?:0"); they are not round trips.
  const sent = entries.filter(([, , , , addr, client]) => client !== ADMIN_CLIENT_NAME && addr !== LUA_CLIENT_ADDR);
  return { entries: sent, truncated: entries.length >= MAX_ENTRIES };
}

export async function readSlowlog(redis: BenchRedis): Promise<SlowlogProfile> {
  const { entries, truncated } = await clientEntries(redis);
  const byCommand = new Map<string, CommandProfile>();
  for (const [, , usec, args] of entries) {
    const command = commandName(args);
    const entry = byCommand.get(command) ?? { command, calls: 0, usec: 0 };
    entry.calls++;
    entry.usec += usec;
    byCommand.set(command, entry);
  }
  const commands = [...byCommand.values()].sort((a, b) => b.usec - a.usec);
  return {
    commands,
    roundTrips: commands.reduce((n, c) => n + c.calls, 0),
    usec: commands.reduce((n, c) => n + c.usec, 0),
    truncated,
  };
}

/**
 * Calls per Redis command name ("evalsha", "bzpopmin", "multi", ...) that clients sent since
 * startSlowlog, and per script name (as readSlowlog names them). EXEC is never logged; the commands
 * queued in a MULTI are, each once. So these are the commands INFO commandstats would count if it
 * left out those that scripts run.
 */
export async function readSentCalls(
  redis: BenchRedis,
): Promise<{ byCommand: Map<string, number>; byScript: Map<string, number>; truncated: boolean }> {
  const { entries, truncated } = await clientEntries(redis);
  const byCommand = new Map<string, number>();
  const byScript = new Map<string, number>();
  for (const [, , , args] of entries) {
    const command = (args[0] ?? '?').toLowerCase();
    byCommand.set(command, (byCommand.get(command) ?? 0) + 1);
    if (command === 'evalsha' || command === 'eval' || command === 'fcall') {
      const name = commandName(args);
      byScript.set(name, (byScript.get(name) ?? 0) + 1);
    }
  }
  return { byCommand, byScript, truncated };
}

import { Redis } from 'ioredis';

/** A script call's arguments as ioredis sent them: after EVALSHA, the SHA1, the number of keys, the keys, the arguments. */
export type ScriptCall = readonly (string | number | Buffer)[];

/**
 * Runs `fn` and returns, with its result, the arguments of every EVALSHA that any ioredis client
 * of this process sent meanwhile (the library's and BullMQ's clients included), by SHA1, so they
 * can be sent again to another script. ioredis offers no hook that keeps a Buffer argument (its
 * tracing channel stringifies them; BullMQ packs its options in one), so this wraps sendCommand
 * while `fn` runs. One recording at a time.
 */
export async function recordScriptCalls<T>(fn: () => Promise<T>): Promise<{ result: T; calls: Map<string, ScriptCall[]> }> {
  const calls = new Map<string, ScriptCall[]>();
  // A command may pass through sendCommand more than once (an offline queue, a reconnection).
  const seen = new WeakSet<object>();
  const proto = Redis.prototype as unknown as { sendCommand: (command: Command, ...rest: unknown[]) => unknown };
  const original = proto.sendCommand;
  if ((original as { recording?: true }).recording) throw new Error('recordScriptCalls: a recording is under way');
  const recording = Object.assign(
    function (this: unknown, command: Command, ...rest: unknown[]) {
      if (command.name === 'evalsha' && !seen.has(command)) {
        seen.add(command);
        const sha = String(command.args[0]);
        const list = calls.get(sha) ?? [];
        list.push([...command.args]);
        calls.set(sha, list);
      }
      return original.call(this, command, ...rest);
    },
    { recording: true as const },
  );
  proto.sendCommand = recording;
  try {
    return { result: await fn(), calls };
  } finally {
    proto.sendCommand = original;
  }
}

interface Command {
  name: string;
  args: (string | number | Buffer)[];
}

/** One of BullMQ's Lua scripts as its package ships it: the source, and how many of its arguments are keys. */
export interface BullmqScript {
  content: string;
  keys: number;
}

/**
 * BullMQ's Lua script `name` (`moveToActive`, `moveToFinished`, `addStandardJob`, …), as the
 * installed package ships it in `bullmq/dist/cjs/scripts` (generated from its
 * `src/commands/*.lua`, includes inlined). Our scripts inline these (storage/scripts/index.ts),
 * so that a push adds a key's job, and a fetch or a claim runs BullMQ's own fetch or completion,
 * in the same call. Throws, naming the script, when the installed BullMQ has no such script.
 */
export function bullmqScript(name: string): BullmqScript {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- BullMQ's script sources have no typed export.
  const scripts = require('bullmq/dist/cjs/scripts') as Record<string, BullmqScript | undefined>;
  const script = scripts[name];
  if (!script) throw new Error(`the installed BullMQ has no script ${name}`);
  return script;
}

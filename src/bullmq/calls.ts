/** An argument of a script call as ioredis sends it (BullMQ's packed options are a Buffer). */
export type SentArg = string | number | Buffer;

/** One of BullMQ's script calls, split: its keys, then its arguments, as its backend builds them. */
export interface BullmqCall {
  keys: readonly string[];
  args: readonly SentArg[];
}

/**
 * A BullMQ script call from the flat list BullMQ hands its client (its `keys` keys, then its
 * arguments: bullmq `src/classes/scripts.ts` builds it so), each value as ioredis sends it when
 * BullMQ runs the script itself (an absent one as '').
 */
export function splitCall(flat: readonly unknown[], keys: number): BullmqCall {
  const asSent = (value: unknown): SentArg =>
    // eslint-disable-next-line @typescript-eslint/no-base-to-string -- what ioredis itself sends for any other value
    value === undefined || value === null ? '' : typeof value === 'number' || Buffer.isBuffer(value) ? value : String(value);
  return { keys: flat.slice(0, keys).map(String), args: flat.slice(keys).map(asSent) };
}

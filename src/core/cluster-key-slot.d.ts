// cluster-key-slot (the slot function ioredis itself uses) ships no types; this declares the
// part we use, matching node_modules/cluster-key-slot/lib/index.js.
declare module 'cluster-key-slot' {
  /** Redis Cluster's hash slot of a key name: CRC16 of its hash tag (or of the whole name), modulo 16384. */
  export default function calculateSlot(key: string | Buffer): number;
}

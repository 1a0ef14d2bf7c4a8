import { Keyspace } from '../../src/storage/keys';
import { ShardLayout } from '../../src/storage/shards';
import { prefixOf } from './redis';

/** The shard layout of `count` shards of a test batcher named `name` that was given no prefix. */
export const layoutOf = (name: string, count: number): ShardLayout =>
  new ShardLayout(prefixOf(name), name, new Keyspace(prefixOf(name), name), count);

/** Keys whose shard under `layout` is `shard`, `n` of them. */
export function keysOfShard(layout: ShardLayout, shard: number, n: number, label = 'acct'): string[] {
  const keys: string[] = [];
  for (let i = 0; keys.length < n; i++) if (layout.of(`${label}-${i}`) === shard) keys.push(`${label}-${i}`);
  return keys;
}

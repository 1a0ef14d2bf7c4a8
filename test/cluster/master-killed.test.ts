import { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { batchByKey, PushOutcomeUnknownError } from '../../src';
import { Keyspace } from '../../src/storage/keys';
import { defaultPrefix } from '../../src/options';
import { CLUSTER_OPTIONS, Recorder, track, uniqueName, waitFor } from '../helpers/redis';
import { allowPartialCoverage, keyslot, ownCluster, role, servers, sigkill, type Node } from '../helpers/cluster';

const cluster = ownCluster();

/**
 * A batcher name, and 3 keys whose data lives on a master that holds none of what else a push
 * writes (the queue, the recovery index, the batcher's config, each in a slot of its own), with
 * that master's replica: killing it fails only the pushes' script calls.
 */
async function nameWithAMasterOfKeysAlone(client: Cluster) {
  const masterOf = async (name: string) => (await servers(client, await keyslot(client, name))).master;
  for (let tries = 0; tries < 20; tries++) {
    const name = uniqueName('killed');
    const prefix = defaultPrefix(name, true);
    const keyspace = new Keyspace(prefix, name);
    const shared = new Set<number>();
    for (const other of [prefix, keyspace.index, keyspace.config]) shared.add((await masterOf(other)).port);
    if (shared.size === 3) continue;
    const keys: string[] = [];
    let alone: { master: Node; replica: Node } | undefined;
    for (let i = 0; keys.length < 3; i++) {
      const key = `acct-${i}`;
      const { master, replicas } = await servers(client, await keyslot(client, keyspace.forKey(key).pending));
      if (shared.has(master.port) || (alone && alone.master.port !== master.port)) continue;
      alone ??= { master, replica: replicas[0]! };
      keys.push(key);
    }
    return { name, keys, ...alone! };
  }
  throw new Error('20 batcher names each had their queue, index and config on the 3 masters');
}

describe('a Redis Cluster master SIGKILLed mid-push', () => {
  it('a rejected push is a PushOutcomeUnknownError (its ids may have landed); no push that rejected otherwise stored an id', async () => {
    // Only the killed master's slots go down. With full coverage required (Redis's default), every
    // node answers CLUSTERDOWN from the moment the master is marked failed until its replica takes
    // over, and pushes would also fail before their script call, at the index write, with nothing stored.
    await allowPartialCoverage(cluster().nodes);
    const client = track(new Cluster(cluster().nodes, CLUSTER_OPTIONS));
    const { name, keys, master, replica } = await nameWithAMasterOfKeysAlone(client);

    const rec = new Recorder();
    const b = track(
      batchByKey({
        name,
        connection: client,
        sliceSize: 50,
        // A run whose lock lived on the dead master holds its key that long after the takeover.
        lockTtlMs: 2_000,
        recoveryIntervalMs: 1_000,
        pushTimeoutMs: 5_000,
        eachIteration: rec.handler,
      }),
    );
    b.createWorker({ concurrency: 3 });

    const pushes: { key: string; ids: string[]; error?: unknown }[] = [];
    const acknowledged = () => pushes.filter((p) => !('error' in p)).length;
    let pushing = true;
    let n = 0;
    // Four pushers, so that pushes are in flight when the master dies.
    const pushers = Array.from({ length: 4 }, async () => {
      while (pushing && n < 20_000) {
        const i = n++;
        const key = keys[i % keys.length]!;
        const ids = Array.from({ length: 5 }, (_, j) => `${i}-${j}`);
        await b.performBatchLater(ids, { key }).then(
          () => pushes.push({ key, ids }),
          (error: unknown) => pushes.push({ key, ids, error }),
        );
      }
    });

    try {
      await waitFor(() => acknowledged() >= 200 && rec.all.length > 0, { what: 'pushes and processing before the kill' });
      await sigkill(master);
      await waitFor(async () => (await role(replica).catch(() => '')) === 'master', {
        what: 'the replica to take over',
        timeoutMs: 30_000,
        intervalMs: 200,
      });
      const atTakeover = acknowledged();
      await waitFor(() => acknowledged() >= atTakeover + 200, { what: 'pushes after the takeover', timeoutMs: 30_000 });
    } finally {
      pushing = false;
      await Promise.all(pushers);
    }

    // Everything stored runs (a key stored without its job is found by the recovery sweep).
    await waitFor(
      async () => {
        for (const key of keys) {
          const { pending, inFlight, retrying } = await b.backlog(key);
          if (pending + inFlight + retrying > 0) return false;
        }
        return true;
      },
      { what: 'every key to drain', timeoutMs: 60_000, intervalMs: 200 },
    );

    const rejected = pushes.filter((p) => 'error' in p);
    expect(rejected.length).toBeGreaterThan(0);
    // Every key drained: an id that was stored has run.
    const processed = new Set(rec.all);
    const definite = rejected.filter((p) => !(p.error instanceof PushOutcomeUnknownError));
    const storedAnyway = definite.filter((p) => p.ids.some((id) => processed.has(id)));
    expect(storedAnyway.map((p) => `${p.ids.join(',')}: ${String(p.error)}`)).toEqual([]);
    // What a push writes beside its key's data never lived on the dead master: every failure came after a script call went out.
    expect(definite.map((p) => String(p.error))).toEqual([]);
  });
});

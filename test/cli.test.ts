import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PermanentError, type Batcher, type Stats } from '../src';
import { keyspaceOf, prefixOf, queueOf, range, Recorder, redisClient, redisUrl, testBatcher, waitFor } from './helpers/redis';
import { keysRefusedByTheWindow } from './helpers/limits';
import { cli, spawnCli } from './helpers/cli';

const on = (b: Batcher) => ['--redis', redisUrl(), '--name', b.name];

/** A batcher with `n` dead letters of key 'k' (ids 0..n-1) and no worker left running. */
async function withDead(n: number): Promise<Batcher> {
  const b = testBatcher({
    eachIteration: (ids) => {
      throw new PermanentError('broken', { ids });
    },
  });
  await b.performBatchLater(range(n), { key: 'k' });
  const worker = b.createWorker();
  await waitFor(async () => (await b.deadLetters.count()) === n, { what: `${n} dead letters` });
  await worker.close();
  return b;
}

describe('the batch-by-key CLI', () => {
  it('push reads ids from stdin, one per line, and stats prints them', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const pushed = await cli([...on(b), 'push', '--key', 'acct-1'], { input: 'a\nb\n\nc\r\n' });
    expect(pushed).toEqual({ code: 0, stdout: 'pushed 3 ids to acct-1\n', stderr: '' });
    expect(await b.backlog('acct-1')).toEqual({ pending: 3, inFlight: 0, retrying: 0 });

    const human = await cli([...on(b), 'stats']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(new RegExp(`^${b.name}: 1 keys, 3 pending, 0 in flight, 0 retrying, 0 dead, lag \\d`));
    expect(human.stdout).toContain('top keys by backlog:\n  acct-1  pending 3');

    const json = await cli([...on(b), 'stats', '--json', '--top', '1']);
    expect(JSON.parse(json.stdout) as Stats).toMatchObject({ name: b.name, keys: 1, pending: 3, topKeys: [{ key: 'acct-1', pending: 3 }] });
  });

  it('says when the name matched nothing, naming the batchers it found, and still answers', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await b.performBatchLater(['a'], { key: 'acct-1' });
    const known = await cli([...on(b), 'stats']);
    expect(known).toMatchObject({ code: 0, stderr: '' });

    const typo = `${b.name}x`;
    const stats = await cli(['--redis', redisUrl(), '--name', typo, 'stats']);
    expect(stats.code).toBe(0);
    expect(stats.stdout).toMatch(new RegExp(`^${typo}: 0 keys, 0 pending`));
    expect(stats.stderr).toMatch(
      new RegExp(
        `^batch-by-key: nothing matched: no batcher named ${typo} has recorded anything in Redis at \\S+ \\(prefix bull\\); batchers found there: .*\\b${b.name}\\b`,
      ),
    );
    const letters = await cli(['--redis', redisUrl(), '--name', typo, 'dead', 'list']);
    expect(letters).toMatchObject({ code: 0, stdout: '', stderr: expect.stringContaining(`no batcher named ${typo}`) });
  });

  it('push sends each line as it is, spaces included: only the line ending (LF, or CRLF) goes, and only empty lines are skipped', async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler });
    const input = ' lead\ntrail \n  both  \r\n\n\r\n   \n\ttab\t\r\nmid\rdle\nключ\nlast';
    const ids = [' lead', 'trail ', '  both  ', '   ', '\ttab\t', 'mid\rdle', 'ключ', 'last'];
    expect(await cli([...on(b), 'push', '--key', 'k'], { input })).toEqual({
      code: 0,
      stdout: `pushed ${ids.length} ids to k\n`,
      stderr: '',
    });
    b.createWorker();
    await waitFor(() => rec.all.length === ids.length, { what: 'every id pushed' });
    expect(rec.idsOf('k')).toEqual(ids);
  });

  it("push --file: a CRLF and a character split over two of the file's read chunks arrive whole", async () => {
    const rec = new Recorder();
    const b = testBatcher({ eachIteration: rec.handler, sliceSize: 1000 });
    // createReadStream reads 64 KiB at a time.
    const chunk = 64 * 1024;
    let text = '';
    const padTo = (offset: number, label: string) => {
      for (let i = 0; Buffer.byteLength(text) < offset - 100; i++) text += `${label}${i}-${'x'.repeat(50)}\r\n`;
    };
    padTo(chunk, 'p');
    // This line's \r is the first chunk's last byte, its \n the second's first.
    text += `${'f'.repeat(chunk - 1 - Buffer.byteLength(text))}\r\n`;
    padTo(2 * chunk, 'q');
    // The two bytes of ж are the second chunk's last and the third's first.
    text += `${'g'.repeat(2 * chunk - 1 - Buffer.byteLength(text))}жend\r\nlast\r\n`;
    const file = join(mkdtempSync(join(tmpdir(), 'bbk-')), 'ids.txt');
    writeFileSync(file, text);
    const ids = text.split('\r\n').filter((id) => id !== '');
    expect(await cli([...on(b), 'push', '--key', 'k', '--file', file])).toMatchObject({
      code: 0,
      stdout: `pushed ${ids.length} ids to k\n`,
    });
    b.createWorker();
    await waitFor(() => rec.all.length === ids.length, { what: 'every id pushed' });
    expect(rec.idsOf('k')).toEqual(ids);
  });

  it('push --file sends a large file in batches (no progress bar when stderr is not a terminal)', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const file = join(mkdtempSync(join(tmpdir(), 'bbk-')), 'ids.txt');
    writeFileSync(file, `${range(25_000).join('\n')}\n`);
    const run = await cli([...on(b), 'push', '--key', 'big', '--file', file]);
    expect(run).toEqual({ code: 0, stdout: 'pushed 25000 ids to big\n', stderr: '' });
    expect((await b.backlog('big')).pending).toBe(25_000);
  });

  it('reads the store from Redis, where the batcher recorded it: no --store needed', async () => {
    const b = testBatcher({ store: 'set', eachIteration: () => {} });
    // The batcher's first push records its store.
    await b.performBatchLater(['a'], { key: 'k' });
    // A set: the CLI's pushes of a and of a again collapse with the batcher's.
    expect(await cli([...on(b), 'push', '--key', 'k'], { input: 'a\na\nb\n' })).toMatchObject({ code: 0 });
    expect(await b.backlog('k')).toEqual({ pending: 2, inFlight: 0, retrying: 0 });
    const json = await cli([...on(b), 'stats', '--json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout) as Stats).toMatchObject({ keys: 1, pending: 2 });
    // A --store that agrees is taken.
    expect(await cli([...on(b), '--store', 'set', 'stats'])).toMatchObject({ code: 0, stderr: '' });
  });

  it("reads every shard of a sharded batcher, and pushes to the largest recorded count's shards", async () => {
    const rec = new Recorder();
    const b = testBatcher({ shards: 3, eachIteration: rec.handler });
    for (const key of range(9, 'acct-')) await b.performBatchLater(['a'], { key });
    const json = await cli([...on(b), 'stats', '--json']);
    expect(JSON.parse(json.stdout) as Stats).toMatchObject({ keys: 9, pending: 9 });
    expect(await cli([...on(b), 'push', '--key', 'acct-100'], { input: 'z\n' })).toMatchObject({ code: 0 });
    // The CLI recorded no other count: the batcher's workers serve its shards, and the push ran.
    expect((await b.shardCounts()).map((c) => c.count)).toEqual([3]);
    b.createWorker({ concurrency: 4 });
    await waitFor(() => rec.all.length === 10, { what: 'every id, the CLI push included' });
    expect(rec.idsOf('acct-100')).toEqual(['z']);
  });

  it('refuses a --store that disagrees with the recorded one, before it reads or pushes anything', async () => {
    const b = testBatcher({ store: 'set', eachIteration: () => {} });
    await b.performBatchLater(['a'], { key: 'k' });
    const config = keyspaceOf(b).config;
    for (const command of [['stats'], ['push', '--key', 'k']]) {
      const wrong = await cli([...on(b), '--store', 'list', ...command], { input: 'x\n' });
      expect(wrong).toEqual({
        code: 2,
        stdout: '',
        stderr: `batch-by-key: --store list disagrees with the store recorded for batcher ${b.name}: 'set' (in ${config}); leave --store out to use it\n`,
      });
    }
    expect(await b.backlog('k')).toEqual({ pending: 1, inFlight: 0, retrying: 0 });
  });

  it('with no store recorded, takes --store (else the default), and its push records it', async () => {
    const b = testBatcher({ store: 'zset', eachIteration: () => {} });
    expect(await cli([...on(b), 'stats', '--json'])).toMatchObject({ code: 0 });
    expect(await cli([...on(b), '--store', 'zset', 'push', '--key', 'k'], { input: '1\n2\n' })).toMatchObject({ code: 0 });
    // Recorded now: the batcher (a zset one) agrees, and the CLI needs --store no more.
    await b.performBatchLater(['3'], { key: 'k' });
    expect(JSON.parse((await cli([...on(b), 'stats', '--json'])).stdout) as Stats).toMatchObject({ pending: 3 });
    expect((await cli([...on(b), '--store', 'list', 'stats'])).code).toBe(2);
  });

  it('stats --watch prints until interrupted', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const child = spawnCli([...on(b), 'stats', '--watch', '50', '--json']);
    let lines = 0;
    child.stdout.on('data', (d: Buffer) => (lines += d.toString().split('\n').length - 1));
    await waitFor(() => lines >= 2, { what: 'two readings' });
    const code = new Promise((resolve) => child.on('close', resolve));
    child.kill('SIGINT');
    expect(await code).toBe(0);
  });

  it('dead list, requeue and purge', async () => {
    const b = await withDead(4);
    const listed = await cli([...on(b), 'dead', 'list', '--limit', '2']);
    expect(listed.code).toBe(0);
    expect(listed.stdout.trim().split('\n')).toHaveLength(2);
    expect(listed.stdout).toMatch(/^k\t\d\t1\t\S+Z\tPermanentError: broken$/m);
    const json = await cli([...on(b), 'dead', 'list', '--json', '--order', 'attempts']);
    expect(
      json.stdout
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as { id: string }).id)
        .sort(),
    ).toEqual(['0', '1', '2', '3']);

    expect(await cli([...on(b), 'dead', 'requeue', '--key', 'k', '--ids', '0,1'])).toMatchObject({ code: 0, stdout: 'requeued 2\n' });
    expect(await b.backlog('k')).toMatchObject({ pending: 2 });

    const refused = await cli([...on(b), 'dead', 'purge']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe('batch-by-key: dead purge without --key or --ids deletes every dead letter: add --yes\n');
    expect(await cli([...on(b), 'dead', 'purge', '--ids', '2'])).toMatchObject({ code: 0, stdout: 'purged 1\n' });
    expect(await cli([...on(b), 'dead', 'purge', '--yes'])).toMatchObject({ code: 0, stdout: 'purged 1\n' });
    expect(await b.deadLetters.count()).toBe(0);
  });

  it('recover --full gives a job to a key whose job was removed by hand; recover alone does not find it', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await b.performBatchLater(['1'], { key: 'removed' });
    const queue = queueOf(b);
    const [job] = await queue.getWaiting();
    await queue.remove(job!.id!);
    expect(await cli([...on(b), 'recover'])).toEqual({ code: 0, stdout: '0 keys got a job\n', stderr: '' });
    expect(await cli([...on(b), 'recover', '--full'])).toEqual({ code: 0, stdout: '1 keys got a job\n', stderr: '' });
    expect((await queue.getWaiting()).map((j) => j.data.key)).toEqual(['removed']);
  });

  it('pause, paused, stats and resume a key', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    expect(await cli([...on(b), 'pause', '--key', 'acct-1'])).toEqual({ code: 0, stdout: 'paused acct-1\n', stderr: '' });
    expect(await cli([...on(b), 'pause', '--key', 'acct-2', '--for', '60000'])).toMatchObject({
      code: 0,
      stdout: 'paused acct-2 for 1.0 min\n',
    });
    const listed = await cli([...on(b), 'paused', '--json']);
    expect(
      listed.stdout
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as { key: string }).key)
        .sort(),
    ).toEqual(['acct-1', 'acct-2']);
    expect((await cli([...on(b), 'stats'])).stdout).toMatch(/paused keys:\n( {2}acct-\d\t.*\n){2}/);
    expect(await cli([...on(b), 'resume', '--key', 'acct-1'])).toEqual({ code: 0, stdout: 'resumed acct-1\n', stderr: '' });
    expect((await b.paused()).map((p) => p.key)).toEqual(['acct-2']);
    const again = await cli([...on(b), 'resume', '--key', 'acct-1']);
    expect(again.code).toBe(2);
    expect(again.stderr).toBe('batch-by-key: key "acct-1" is not paused\n');
  });

  it('limits set and limits show: the batcher-wide limits, at run time', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await b.performBatchLater(['1'], { key: 'a' });
    expect(await cli([...on(b), 'limits', 'set', '--rate', '600/60000', '--concurrency', '8'])).toEqual({
      code: 0,
      stdout: 'rate 600 ids per 1.0 min, concurrency 8\n',
      stderr: '',
    });
    expect((await b.stats()).limits).toMatchObject({ rate: { max: 600, durationMs: 60_000 }, concurrency: { limit: 8 } });
    expect((await cli([...on(b), 'limits', 'show'])).stdout).toMatch(/^rate 0\/600 ids per 1\.0 min, concurrency 0\/8 running, 0 waiting/);
    expect((await cli([...on(b), 'stats'])).stdout).toMatch(/\nlimits: rate 0\/600/);
    expect(await cli([...on(b), 'limits', 'set', '--concurrency', 'off'])).toEqual({ code: 0, stdout: 'concurrency off\n', stderr: '' });
    expect((await b.stats()).limits).not.toHaveProperty('concurrency');
    expect((await cli([...on(b), 'limits', 'set', '--rate', '600'])).code).toBe(2);
    expect((await cli([...on(b), 'limits', 'set'])).code).toBe(2);
  });

  it('limits show and set with a name that has no trace in Redis: show fails saying so; set refuses unless --force', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await b.performBatchLater(['1'], { key: 'a' });
    const typo = `${b.name}x`;
    const config = `${prefixOf(typo)}:${typo}:bbk:config`;
    const show = await cli(['--redis', redisUrl(), '--name', typo, 'limits', 'show']);
    expect(show).toMatchObject({ code: 2, stdout: '' });
    expect(show.stderr).toMatch(
      new RegExp(`^batch-by-key: no limits are configured for batcher ${typo}: nothing matched: .*batchers found there: .*\\b${b.name}\\b`),
    );
    const set = await cli(['--redis', redisUrl(), '--name', typo, 'limits', 'set', '--concurrency', '3']);
    expect(set).toMatchObject({ code: 2, stdout: '' });
    expect(set.stderr).toMatch(/nobody runs: check --name and --prefix, or add --force\n$/);
    expect(await redisClient().exists(config)).toBe(0);
    const forced = await cli(['--redis', redisUrl(), '--name', typo, 'limits', 'set', '--concurrency', '3', '--force']);
    expect(forced).toMatchObject({
      code: 0,
      stdout: 'concurrency 3\n',
      stderr: expect.stringContaining('setting the limits anyway (--force)'),
    });
    expect(await redisClient().hget(config, 'globalConcurrency')).toBe('3');
  });

  it('drop refuses without --yes (exit 2), saying what it would drop; with it, drops and prints the counts', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    await b.performBatchLater(range(3), { key: 'an account' });
    await b.performBatchLater(['h'], { key: 'an account', priority: 'high' });
    const refused = await cli([...on(b), 'drop', '--key', 'an account']);
    expect(refused).toEqual({
      code: 2,
      stdout: '',
      stderr: "batch-by-key: drop would delete from key 'an account' 4 pending, 0 in flight and 0 retrying ids: add --yes\n",
    });
    expect(await b.backlog('an account')).toMatchObject({ pending: 4 });
    expect(await cli([...on(b), 'drop', '--key', 'an account', '--yes'])).toEqual({
      code: 0,
      stdout: "dropped 'an account': 4 pending, 0 in flight, 0 retrying, 0 tickets, 0 dead letters\n",
      stderr: '',
    });
    expect(await b.backlog('an account')).toEqual({ pending: 0, inFlight: 0, retrying: 0 });
    const json = await cli([...on(b), 'drop', '--key', 'an account', '--yes', '--dead-letters', '--json']);
    expect(JSON.parse(json.stdout)).toEqual({ pending: 0, inFlight: 0, retrying: 0, tickets: 0, deadLetters: 0 });
  });

  it('limits set wakes the keys waiting for a limit though the CLI exits at once: the workers hear the change', async () => {
    const { b, ran } = await keysRefusedByTheWindow();
    expect(await cli([...on(b), 'limits', 'set', '--rate', '1000/1000'])).toMatchObject({ code: 0 });
    // Well within their own wait (the window's minute): the workers read the limits every second.
    await waitFor(() => ran.has('b') && ran.has('c'), { what: 'keys b and c, woken', timeoutMs: 10_000 });
  });

  it('dead list quotes keys, ids and error messages: a newline, a tab or an ESC in them forges no line, field or terminal sequence', async () => {
    const esc = '\u001b';
    const b = testBatcher({
      eachIteration: (ids) => {
        throw new PermanentError(`bad\n${esc}[2Jforged\tline`, { ids });
      },
    });
    const key = `k\n${esc}[31mred\tkey`;
    const ids = ['a\tb', `c\n${esc}]0;title\u0007`, 'c1\u009b31m'];
    await b.performBatchLater(ids, { key });
    const worker = b.createWorker();
    await waitFor(async () => (await b.deadLetters.count()) === ids.length, { what: 'three dead letters' });
    await worker.close();
    const listed = await cli([...on(b), 'dead', 'list']);
    expect(listed.code).toBe(0);
    // Before the fix: 6 lines, 12 ESC bytes.
    expect(listed.stdout).not.toContain(esc);
    expect(listed.stdout).not.toContain('\u009b');
    const lines = listed.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(ids.length);
    for (const line of lines) expect(line.split('\t')).toHaveLength(5);
    const fields = lines.map((line) => line.split('\t'));
    // Each key and id printed as stats and paused print keys: bash takes it back whole.
    const unquote = (quoted: string) =>
      new Promise<string>((resolve) => {
        const sh = spawn('bash', ['-c', `printf %s ${quoted}`]);
        let out = '';
        sh.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
        sh.on('close', () => resolve(out));
      });
    expect(await Promise.all(fields.map(([k]) => unquote(k!)))).toEqual(ids.map(() => key));
    expect((await Promise.all(fields.map(([, id]) => unquote(id!)))).sort()).toEqual([...ids].sort());
    expect(fields[0]![4]).toBe(`PermanentError: $'bad\\n\\x1b[2Jforged\\tline'`);
  });

  it('paused prints each key so that bash takes it back whole: leading spaces, tabs, newlines and quotes', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const keys = ['  lead', 'tab\tkey', "it's", 'line\nbreak', 'plain-1'];
    for (const key of keys) await b.pause(key);
    const listed = await cli([...on(b), 'paused']);
    const lines = listed.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(keys.length);
    const back = await Promise.all(
      lines.map(
        (line) =>
          new Promise<string>((resolve) => {
            const quoted = line.slice(0, line.lastIndexOf('\tuntil '));
            const sh = spawn('bash', ['-c', `printf %s ${quoted}`]);
            let out = '';
            sh.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
            sh.on('close', () => resolve(out));
          }),
      ),
    );
    expect(back.sort()).toEqual([...keys].sort());
    // And what it printed works after --key.
    const lead = lines.find((line) => line.startsWith("'  lead'"))!;
    expect(lead).toBeDefined();
    expect((await cli([...on(b), 'resume', '--key', '  lead'])).code).toBe(0);
  });

  it('keys show prints the counts and a page of pending ids in run order, quoted, with their data and the next offset', async () => {
    const b = testBatcher({ eachIteration: () => {} });
    const key = 'acct\tone';
    await b.performBatchLater(['a', { id: 'line\nbreak', data: { n: 1 } }, 'c'], { key });
    await b.performBatchLater(['h'], { key, priority: 'high' });
    const shown = await cli([...on(b), 'keys', 'show', key, '--limit', '3']);
    expect(shown).toMatchObject({ code: 0, stderr: '' });
    expect(shown.stdout.split('\n')).toEqual([
      "$'acct\\tone': pending 4 (high 1, normal 3), in flight 0, retrying 0",
      'pending (3 listed, in the order they will run):',
      '  h\thigh',
      '  a\tnormal',
      `  $'line\\nbreak'\tnormal\t[{"n":1}]`,
      'more: --offset 3',
      '',
    ]);
    const rest = await cli([...on(b), 'keys', 'show', key, '--offset', '3', '--level', 'normal', '--json']);
    expect(JSON.parse(rest.stdout)).toEqual({
      key,
      pending: { high: 1, normal: 3, ids: [] },
      running: [],
      retrying: [],
    });
    const level = await cli([...on(b), 'keys', 'show', key, '--level', 'normal', '--offset', '2']);
    expect(level.stdout).toContain('\n  c\tnormal\n');
    expect((await cli([...on(b), 'keys', 'show', key, '--limit', '1001'])).code).toBe(2);
    expect((await cli([...on(b), 'keys', 'show', key, '--cursor', 'normal 0 0'])).code).toBe(2);
  });

  it('exits 2 on usage errors and 1 with a one-line message when Redis is unreachable', async () => {
    const noName = await cli(['stats']);
    expect(noName.code).toBe(2);
    expect(noName.stderr).toContain("required option '--name <name>' not specified");
    expect((await cli(['--name', 'q', 'dead', 'list', '--order', 'size'])).code).toBe(2);
    const badKey = await cli(['--redis', redisUrl(), '--name', 'q', 'push', '--key', 'x'.repeat(2000)], { input: '1\n' });
    expect(badKey.code).toBe(2);
    expect(badKey.stderr).toMatch(/^batch-by-key: .*key/);

    const down = await cli(['--redis', 'redis://user:secret@127.0.0.1:1', '--name', 'q', 'stats']);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/^batch-by-key: cannot reach Redis at redis:\/\/user:\*\*\*@127\.0\.0\.1:1\/? \(.+\)\n$/);
    // A URL that does not even parse (port out of range) keeps its password masked too.
    const malformed = await cli(['--redis', 'redis://admin:s3cr3t@127.0.0.1:99999', '--name', 'q', 'stats']);
    expect(malformed.code).not.toBe(0);
    expect(malformed.stderr).not.toContain('s3cr3t');
    expect(malformed.stderr).toContain('admin:***@');
    const debug = await cli(['--redis', 'redis://127.0.0.1:1', '--name', 'q', '--debug', 'stats']);
    expect(debug.code).toBe(1);
    expect(debug.stderr.split('\n').length).toBeGreaterThan(3); // the stack too
    expect((await cli(['--help'])).code).toBe(0);
  });
});

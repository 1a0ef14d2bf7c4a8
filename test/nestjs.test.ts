import { execFile, fork } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  Body,
  Controller,
  Global,
  HttpCode,
  Inject,
  Injectable,
  Module,
  Param,
  Post,
  type INestApplication,
  type INestApplicationContext,
  type LoggerService,
  type Type,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { describe, expect, it } from 'vitest';
import {
  batchByKey,
  ClosedError,
  InvalidOptionError,
  MissingHandlerError,
  PermanentError,
  type Batcher,
  type BatcherEvents,
  type Connection,
  type IterationContext,
  type KeyWorker,
} from '../src';
import { BatchByKeyModule, BatchProcessor, getBatcherToken, InjectBatcher, OnBatchEvent } from '../src/nestjs';
import { Keyspace } from '../src/storage/keys';
import { Gate } from './helpers/gate';
import {
  keysMatching,
  onCluster,
  queueOf,
  range,
  redisClient,
  redisUrl,
  testConnection,
  track,
  uniqueName,
  waitFor,
} from './helpers/redis';

// Constructor parameters name their tokens with @Inject: vitest's transformer would emit the type
// metadata Nest reads otherwise, but tsx (esbuild), which runs the fixtures, does not.

/** The app's own service, injected into the processor: what it records is what the batcher processed. */
@Injectable()
class Records {
  readonly byKey = new Map<string, string[]>();
  readonly dead: BatcherEvents['dead'][0][] = [];
  readonly failed: BatcherEvents['slice:failed'][0][] = [];
  readonly interrupted: BatcherEvents['interrupted'][0][] = [];
  add(key: string, ids: readonly string[]): void {
    this.byKey.set(key, [...(this.byKey.get(key) ?? []), ...ids]);
  }
  count(): number {
    return [...this.byKey.values()].reduce((n, ids) => n + ids.length, 0);
  }
}

/** A Nest application, closed after the test too (a second close() is a no-op for Nest), should the test fail before its own. */
async function boot<T extends INestApplicationContext>(create: Promise<T>): Promise<T> {
  const app = await create;
  track({ close: () => app.close() });
  return app;
}

/** Nest's default would abort the process on a bad module graph; tests want the error. */
const quiet = { logger: false, abortOnError: false } as const;

const createContext = (module: Type) => boot(NestFactory.createApplicationContext(module, quiet));

describe('BatchByKeyModule in a Nest application', () => {
  it('a controller pushes with @InjectBatcher; the @BatchProcessor, with its injected service, processes each key in order; events reach @OnBatchEvent methods', async () => {
    const name = uniqueName('nest');
    const warnings: string[] = [];

    @Controller('accounts')
    class AccountsController {
      constructor(@InjectBatcher(name) private readonly refresher: Batcher) {}

      @Post(':account/refresh')
      @HttpCode(202)
      async refresh(@Param('account') account: string, @Body() body: { ids: string[] }) {
        const { key, pushed } = await this.refresher.performBatchLater(body.ids, { key: account });
        return { key, pushed };
      }
    }

    @BatchProcessor(name, { concurrency: 2 })
    class RefreshProcessor {
      constructor(@Inject(Records) private readonly records: Records) {}

      eachIteration(ids: string[], ctx: IterationContext): void {
        if (ids.includes('poison')) throw new PermanentError('cannot refresh', { ids: ['poison'] });
        this.records.add(ctx.key, ids);
      }

      @OnBatchEvent('dead')
      onDead(event: BatcherEvents['dead'][0]): void {
        this.records.dead.push(event);
      }

      @OnBatchEvent('slice:failed')
      onFailed(event: BatcherEvents['slice:failed'][0]): void {
        this.records.failed.push(event);
      }

      @OnBatchEvent('interrupted')
      onInterrupted(event: BatcherEvents['interrupted'][0]): void {
        this.records.interrupted.push(event);
      }

      // A listener that rejects is logged; it must not disturb the slices.
      @OnBatchEvent('slice:done')
      onDone(): Promise<void> {
        return Promise.reject(new Error('the metrics backend is down'));
      }
    }

    @Module({
      imports: [
        BatchByKeyModule.forRoot({ connection: testConnection() }),
        // maxRuntimeMs: 1 ends every run after one slice, so 'interrupted' fires while keys still have ids.
        BatchByKeyModule.registerBatcher({
          name,
          sliceSize: 3,
          maxRuntimeMs: 1,
          logger: { warn: (message) => void warnings.push(message) },
        }),
      ],
      controllers: [AccountsController],
      providers: [Records, RefreshProcessor],
    })
    class AppModule {}

    const app = await boot(NestFactory.create<INestApplication>(AppModule, quiet));
    await app.listen(0, '127.0.0.1');
    const base = await app.getUrl();
    const push = async (account: string, ids: string[]) => {
      const res = await fetch(`${base}/accounts/${account}/refresh`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ids }),
      });
      expect(res.status).toBe(202);
      return res.json();
    };

    expect(await push('a', range(10, 'a'))).toEqual({ key: 'a', pushed: 10 });
    await push('b', range(10, 'b'));
    await push(
      'a',
      range(10, 'a').map((id) => `${id}x`),
    );
    await push('c', ['c1', 'poison', 'c2']);

    const records = app.get(Records);
    await waitFor(() => records.count() === 32 && records.dead.length === 1, { what: 'every id to be processed or dead' });
    expect(records.byKey.get('a')).toEqual([...range(10, 'a'), ...range(10, 'a').map((id) => `${id}x`)]);
    expect(records.byKey.get('b')).toEqual(range(10, 'b'));
    expect(records.byKey.get('c')).toEqual(['c1', 'c2']);
    expect(records.dead).toEqual([expect.objectContaining({ key: 'c', ids: ['poison'], error: expect.any(PermanentError) })]);
    expect(records.failed).toEqual([expect.objectContaining({ key: 'c', outcome: 'dead' })]);
    expect(records.interrupted.map((e) => e.reason)).toContain('max_runtime');
    expect(warnings).toContain(`batch-by-key: @OnBatchEvent('slice:done') RefreshProcessor.onDone rejected`);

    await app.close();
  });

  it("forRootAsync takes the app's own Redis client, which app.close() leaves open; its workers and batchers close", async () => {
    const worked = uniqueName('nest-w');
    const produced = uniqueName('nest-p');
    const client = redisClient();
    const REDIS = Symbol('app redis');

    @Global()
    @Module({ providers: [{ provide: REDIS, useValue: client }], exports: [REDIS] })
    class RedisModule {}

    @Injectable()
    class Producers {
      constructor(
        @InjectBatcher(produced) readonly producer: Batcher,
        @InjectBatcher(worked) readonly worked: Batcher,
      ) {}
    }

    @BatchProcessor(worked)
    class CountingProcessor {
      constructor(@Inject(Records) private readonly records: Records) {}
      eachIteration(ids: string[], ctx: IterationContext): void {
        this.records.add(ctx.key, ids);
      }
    }

    @Module({
      imports: [
        RedisModule,
        BatchByKeyModule.forRootAsync({ inject: [REDIS], useFactory: (redis: Connection) => ({ connection: redis }) }),
        BatchByKeyModule.registerBatcher({ name: worked }, { name: produced }),
      ],
      providers: [Records, Producers, CountingProcessor],
    })
    class AppModule {}

    const app = await createContext(AppModule);
    const { producer, worked: workedBatcher } = app.get(Producers);
    // No @BatchProcessor for it: a producer, as batchByKey without eachIteration.
    expect(() => producer.createWorker()).toThrow(MissingHandlerError);
    await producer.performBatchLater(['p1'], { key: 'k' });

    await workedBatcher.performBatchLater(range(5), { key: 'k' });
    const records = app.get(Records);
    await waitFor(() => records.count() === 5, { what: 'the worker on the shared client' });
    const queue = queueOf(workedBatcher);
    expect((await queue.getWorkers()).length).toBeGreaterThan(0);

    await app.close();
    expect(await queue.getWorkers()).toEqual([]);
    await expect(workedBatcher.performBatchLater(['x'], { key: 'k' })).rejects.toThrow(ClosedError);
    await expect(producer.performBatchLater(['x'], { key: 'k' })).rejects.toThrow(ClosedError);
    // The client is the app's: still open, and the producer's id is still there for a worker elsewhere.
    expect(client.status).toBe('ready');
    expect(await client.ping()).toBe('PONG');
    const reader = track(batchByKey({ name: produced, connection: testConnection() }));
    expect(await reader.backlog('k')).toEqual({ pending: 1, inFlight: 0, retrying: 0 });
  });

  it("registerBatcherAsync builds a batcher's options in a factory with injected services: weight and onTicketSettled use them", async () => {
    const name = uniqueName('nest-async');

    /** The app's plan lookup and mailer, which the batcher's functions reach through injection. */
    @Injectable()
    class Plans {
      readonly weighed: string[] = [];
      readonly mailed: string[] = [];
      weight(account: string): number {
        this.weighed.push(account);
        return account.startsWith('enterprise') ? 4 : 1;
      }
      mail(ticket: string): void {
        this.mailed.push(ticket);
      }
    }

    @Module({ providers: [Plans], exports: [Plans] })
    class PlansModule {}

    @BatchProcessor(name)
    class Processor {
      constructor(@Inject(Records) private readonly records: Records) {}
      eachIteration(ids: string[], ctx: IterationContext): void {
        this.records.add(ctx.key, ids);
      }
    }

    @Module({
      imports: [
        BatchByKeyModule.forRoot({ connection: testConnection() }),
        BatchByKeyModule.registerBatcherAsync({
          name,
          imports: [PlansModule],
          inject: [Plans],
          useFactory: async (plans: Plans) => {
            await Promise.resolve();
            return {
              sliceSize: 2,
              weight: (key: string) => plans.weight(key),
              onTicketSettled: (_outcome: unknown, ticket: string) => plans.mail(ticket),
            };
          },
        }),
      ],
      providers: [Records, Processor],
    })
    class AppModule {}

    const app = await createContext(AppModule);
    const batcher = app.get<Batcher>(getBatcherToken(name));
    const { ticket } = await batcher.performBatchLater(range(5), { key: 'enterprise-7', track: true });
    const records = app.get(Records);
    const plans = app.select(PlansModule).get(Plans);
    await waitFor(() => records.count() === 5 && plans.mailed.length === 1, { what: 'the slices and the callback' });
    expect(records.byKey.get('enterprise-7')).toEqual(range(5));
    expect(plans.weighed).toContain('enterprise-7');
    expect(plans.mailed).toEqual([ticket]);
    await app.close();
  });

  it("registerBatcherAsync checks its factory's options as registerBatcher's: a bad one fails the start, and a name is refused", async () => {
    const badOption = uniqueName('nest-async-bad');
    @Module({
      imports: [
        BatchByKeyModule.forRoot({ connection: testConnection() }),
        BatchByKeyModule.registerBatcherAsync({ name: badOption, useFactory: () => ({ sliceSize: 0 }) }),
      ],
    })
    class BadOptionModule {}
    await expect(createContext(BadOptionModule)).rejects.toThrow(InvalidOptionError);

    const renamed = uniqueName('nest-async-name');
    @Module({
      imports: [
        BatchByKeyModule.forRoot({ connection: testConnection() }),
        BatchByKeyModule.registerBatcherAsync({ name: renamed, useFactory: () => ({ name: 'other' }) as never }),
      ],
    })
    class RenamedModule {}
    await expect(createContext(RenamedModule)).rejects.toThrow(/the factory's options must not set name/);

    expect(() => BatchByKeyModule.registerBatcherAsync({ name: renamed } as never)).toThrow(/needs a useFactory function/);
    expect(() => BatchByKeyModule.registerBatcherAsync({ name: renamed, useFactory: () => ({}), injects: [] } as never)).toThrow(
      /unknown option "injects"; did you mean inject\?/,
    );
    expect(() =>
      BatchByKeyModule.registerBatcherAsync({ name: renamed, useFactory: () => ({}) }, { name: renamed, useFactory: () => ({}) }),
    ).toThrow(/'.*' is given twice/);
    expect(await keysMatching(`*${badOption}*`)).toEqual([]);
  });

  it('app.close() lets the running slice finish before the worker closes; the ids left stay pending, none lost', async () => {
    const name = uniqueName('nest-close');
    const gate = new Gate();
    const signals: AbortSignal[] = [];

    @BatchProcessor(name)
    class SlowProcessor {
      constructor(@Inject(Records) private readonly records: Records) {}
      async eachIteration(ids: string[], ctx: IterationContext): Promise<void> {
        signals.push(ctx.signal);
        await gate.opened;
        this.records.add(ctx.key, ids);
      }
    }

    @Module({
      imports: [BatchByKeyModule.forRoot({ connection: testConnection() }), BatchByKeyModule.registerBatcher({ name, sliceSize: 2 })],
      providers: [Records, SlowProcessor],
    })
    class AppModule {}

    const app = await createContext(AppModule);
    const batcher = app.get<Batcher>(getBatcherToken(name));
    await batcher.performBatchLater(range(10), { key: 'k' });
    await waitFor(() => signals.length === 1, { what: 'the first slice to start' });

    let closed = false;
    const closing = app.close().then(() => (closed = true));
    // The worker's close aborts the running slice's signal, then waits for the slice.
    await waitFor(() => signals[0]!.aborted, { what: 'close() to reach the worker' });
    expect(closed).toBe(false);
    gate.open();
    await closing;

    const records = app.get(Records);
    expect(records.byKey.get('k')).toEqual(['0', '1']);
    expect(signals).toHaveLength(1); // no slice started after close began
    const reader = track(batchByKey({ name, connection: testConnection() }));
    expect(await reader.backlog('k')).toEqual({ pending: 8, inFlight: 0, retrying: 0 });
  });

  it("without a logger option, the library logs through Nest's logger (what app.useLogger or the logger option set)", async () => {
    const name = uniqueName('nest-log');
    const errors: { message: unknown; context: unknown }[] = [];
    const logger: LoggerService = {
      log: () => {},
      warn: () => {},
      // Nest calls error(message, stack, context) for a message with a stack.
      error: (message: unknown, ...rest: unknown[]) => void errors.push({ message, context: rest.at(-1) }),
    };

    @BatchProcessor(name)
    class Failing {
      eachIteration(): void {
        throw new PermanentError('no such segment');
      }
    }
    @Module({
      imports: [
        BatchByKeyModule.forRoot({ connection: testConnection() }),
        BatchByKeyModule.registerBatcher({ name, isolateFailures: false }),
      ],
      providers: [Failing],
    })
    class AppModule {}

    const app = await boot(NestFactory.createApplicationContext(AppModule, { logger, abortOnError: false }));
    await app.get<Batcher>(getBatcherToken(name)).performBatchLater(['1'], { key: 'k' });
    await waitFor(() => errors.length > 0, { what: 'the failed slice to be logged' });
    expect(errors[0]).toEqual({ message: expect.stringMatching(/^batch-by-key: slice failed: no such segment /), context: 'BatchByKey' });
  });

  it.skipIf(onCluster())('a process that boots an application and closes it exits by itself: nothing is left open', async () => {
    const child = fork(join(__dirname, 'fixtures', 'nestjs-app.ts'), [], {
      execArgv: ['--import', 'tsx'],
      env: { ...process.env, REDIS_URL: redisUrl(), BBK_NAME: uniqueName('nest-proc') },
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const exit = new Promise<number | null>((resolve) => child.once('exit', resolve));
    track({
      close: () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        return Promise.resolve();
      },
    });
    // The fixture never calls process.exit: an open handle (a connection, a timer) would keep it alive.
    const code = await Promise.race([exit, new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 30_000).unref())]);
    expect(code).toBe(0);
    expect(out).toContain('processed 25 ids, closed');
  });
});

describe('BatchByKeyModule and the application bootstrap', () => {
  /** An application with a @BatchProcessor, a root module with a bootstrap hook of its own, and a feature module's provider whose hook may throw. */
  function bootstrapApp(name: string, failing: boolean) {
    const order: string[] = [];
    @BatchProcessor(name)
    class Processor {
      eachIteration(ids: string[]): void {
        order.push(`slice ${ids.join(',')}`);
      }
    }
    @Injectable()
    class Migrations {
      onApplicationBootstrap(): void {
        order.push('feature hook');
        if (failing) throw new Error('migrations failed');
      }
    }
    @Module({ providers: [Migrations] })
    class FeatureModule {}
    @Module({
      imports: [BatchByKeyModule.forRoot({ connection: testConnection() }), BatchByKeyModule.registerBatcher({ name }), FeatureModule],
      providers: [Processor],
    })
    class AppModule {
      onApplicationBootstrap(): void {
        order.push('root hook');
      }
    }
    return { AppModule, order };
  }

  it("when another provider's onApplicationBootstrap throws, the start fails and no worker runs: the ids pushed stay pending", async () => {
    const name = uniqueName('nest-boot');
    const { AppModule, order } = bootstrapApp(name, true);
    const app = await boot(NestFactory.create<INestApplication>(AppModule, quiet));
    const batcher = app.get<Batcher>(getBatcherToken(name));
    await batcher.performBatchLater(['1', '2'], { key: 'k' });
    await expect(app.init()).rejects.toThrow('migrations failed');
    expect(order).toEqual(['feature hook']);
    // A worker shows in Redis as a named client of the queue from its start.
    expect(await queueOf(batcher).getWorkersCount()).toBe(0);
    expect((await batcher.stats()).pending).toBe(2);
  });

  it("workers start after every bootstrap hook, the root module's own included, which runs once", async () => {
    const name = uniqueName('nest-boot');
    const { AppModule, order } = bootstrapApp(name, false);
    const app = await boot(NestFactory.create<INestApplication>(AppModule, quiet));
    await app.get<Batcher>(getBatcherToken(name)).performBatchLater(['1', '2'], { key: 'k' });
    await app.init();
    await waitFor(() => order.includes('slice 1,2'), { what: 'the slice' });
    expect(order).toEqual(['feature hook', 'root hook', 'slice 1,2']);
  });
});

describe('BatchByKeyModule configuration errors', () => {
  it('a registration is checked when the module is defined, with the option named', () => {
    expect(() => BatchByKeyModule.registerBatcher({ name: 'no spaces' })).toThrow(InvalidOptionError);
    expect(() => BatchByKeyModule.registerBatcher({ name: 'x', sliceSize: 0 })).toThrow(/options\.sliceSize/);
    expect(() => BatchByKeyModule.registerBatcher({ name: 'x' }, { name: 'x' })).toThrow(/'x' is given twice/);
    const withConnection = { name: 'x', connection: 'redis://localhost' } as unknown as { name: string };
    expect(() => BatchByKeyModule.registerBatcher(withConnection)).toThrow(/connection comes from BatchByKeyModule\.forRoot/);
    expect(() => BatchByKeyModule.forRootAsync({} as never)).toThrow(InvalidOptionError);
    expect(() => BatchProcessor('')).toThrow(InvalidOptionError);
    expect(() => OnBatchEvent('pushed' as never)).toThrow(/OnBatchEvent\(event\) takes one of/);
  });

  it('an unknown option name fails where it is given, naming the closest known one (a typo would otherwise run with the default)', async () => {
    const typo = <T>(options: T) => options as never;
    expect(() => BatchByKeyModule.registerBatcher(typo({ name: 'x', sliceSzie: 5 }))).toThrow(
      /BatchByKeyModule\.registerBatcher options: unknown option "sliceSzie"; did you mean sliceSize\?/,
    );
    expect(() => BatchByKeyModule.forRoot(typo({ connection: testConnection(), prefx: 'app' }))).toThrow(
      /BatchByKeyModule\.forRoot options: unknown option "prefx"; did you mean prefix\?/,
    );
    expect(() => BatchByKeyModule.forRootAsync(typo({ useFactory: () => ({ connection: testConnection() }), injects: [] }))).toThrow(
      /BatchByKeyModule\.forRootAsync options: unknown option "injects"; did you mean inject\?/,
    );

    // What forRootAsync's factory answers is known only at the start, and checked there.
    @Module({ imports: [BatchByKeyModule.forRootAsync({ useFactory: () => typo({ connection: testConnection(), prefx: 'app' }) })] })
    class AsyncTypo {}
    await expect(createContext(AsyncTypo)).rejects.toThrow(/BatchByKeyModule root options: unknown option "prefx"/);

    // A processor's worker options are BullMQ's, checked at the start: the start fails.
    const name = uniqueName('nest-typo');
    @BatchProcessor(name, typo({ concurency: 2 }))
    class Processor {
      eachIteration(): void {}
    }
    @Module({
      imports: [BatchByKeyModule.forRoot({ connection: testConnection() }), BatchByKeyModule.registerBatcher({ name })],
      providers: [Processor],
    })
    class WorkerTypo {}
    await expect(createContext(WorkerTypo)).rejects.toThrow(/unknown option "concurency"; did you mean concurrency\?/);
  });

  /**
   * An application with two processors, the second with `badOptions`, built but not started; two
   * ids pushed to the first's batcher, and every worker the registry makes for it recorded.
   */
  async function twoProcessors(label: string, badOptions: object) {
    const [good, bad] = [uniqueName(label), uniqueName(label)];
    const processed: string[] = [];
    @BatchProcessor(good)
    class GoodProcessor {
      eachIteration(ids: string[]): void {
        processed.push(...ids);
      }
    }
    @BatchProcessor(bad, badOptions)
    class BadProcessor {
      eachIteration(): void {}
    }
    // The good batcher is registered, and so started, first: it would run while the start fails.
    @Module({
      imports: [
        BatchByKeyModule.forRoot({ connection: testConnection() }),
        BatchByKeyModule.registerBatcher({ name: good }, { name: bad }),
      ],
      providers: [GoodProcessor, BadProcessor],
    })
    class AppModule {}
    const app = await boot(NestFactory.create<INestApplication>(AppModule, quiet));
    const batcher = app.get<Batcher>(getBatcherToken(good));
    const workers: KeyWorker[] = [];
    const createWorker = batcher.createWorker.bind(batcher);
    batcher.createWorker = (options) => {
      const worker = createWorker(options);
      workers.push(worker);
      return worker;
    };
    await batcher.performBatchLater(['1', '2'], { key: 'k' });
    return { app, batcher, workers, processed };
  }

  it("a processor's worker options are checked with every other processor's before any worker starts: a typo in one leaves its siblings' ids pending", async () => {
    const { app, batcher, workers, processed } = await twoProcessors('nest-typo', { concurency: 2 });
    await expect(app.init()).rejects.toThrow(
      /@BatchProcessor\('nest-typo-\w+'\) on BadProcessor workerOptions: unknown option "concurency"; did you mean concurrency\?/,
    );
    expect(workers).toEqual([]);
    expect(await queueOf(batcher).getWorkersCount()).toBe(0);
    expect((await batcher.stats()).pending).toBe(2);
    expect(processed).toEqual([]);
  });

  it("a worker option that only BullMQ's Worker refuses (concurrency 0) fails the start with no sibling's worker left running", async () => {
    const { app, batcher, workers, processed } = await twoProcessors('nest-bullmq', { concurrency: 0 });
    await expect(app.init()).rejects.toThrow(/concurrency/);
    // The good processor's worker was built first, not running, and closed again when the next failed.
    expect(workers).toHaveLength(1);
    expect(workers[0]!.closing).toBeDefined();
    await workers[0]!.closing;
    expect(workers[0]!.isRunning()).toBe(false);
    expect(await queueOf(batcher).getWorkersCount()).toBe(0);
    expect((await batcher.stats()).pending).toBe(2);
    expect(processed).toEqual([]);
  });

  it("forRoot without a connection fails the start; its prefix is every batcher's default, and a batcher's own wins", async () => {
    @Module({ imports: [BatchByKeyModule.forRoot({} as never)] })
    class NoConnection {}
    await expect(createContext(NoConnection)).rejects.toThrow(/BatchByKeyModule\.forRoot needs \{ connection \}/);

    const [inherits, own] = [uniqueName('nest-prefix'), uniqueName('nest-prefix')];
    // Hash tags, so the prefixes are valid on a Redis Cluster too.
    @Module({
      imports: [
        BatchByKeyModule.forRoot({ connection: testConnection(), prefix: 'app:{nest-root}' }),
        BatchByKeyModule.registerBatcher({ name: inherits }, { name: own, prefix: 'app:{nest-own}' }),
      ],
    })
    class AppModule {}
    const app = await createContext(AppModule);
    await app.get<Batcher>(getBatcherToken(inherits)).performBatchLater(['1'], { key: 'k' });
    await app.get<Batcher>(getBatcherToken(own)).performBatchLater(['1'], { key: 'k' });
    for (const [name, prefix] of [
      [inherits, 'app:{nest-root}'],
      [own, 'app:{nest-own}'],
    ] as const) {
      // BullMQ's keys start with the prefix; ours with the prefix less its braces (Keyspace).
      const keys = await keysMatching(`*${name}*`);
      expect(keys.length).toBeGreaterThan(0);
      expect(keys.filter((k) => !k.startsWith(`${prefix}:${name}:`) && !k.startsWith(`${new Keyspace(prefix, name).root}:`))).toEqual([]);
    }
  });

  it("a @BatchProcessor whose name no registerBatcher provides fails the application's start", async () => {
    @BatchProcessor('nobody-registered-this')
    class Orphan {
      eachIteration(): void {}
    }
    @Module({ imports: [BatchByKeyModule.forRoot({ connection: testConnection() })], providers: [Orphan] })
    class AppModule {}
    await expect(createContext(AppModule)).rejects.toThrow(
      /@BatchProcessor\('nobody-registered-this'\) on Orphan: no batcher has that name/,
    );
  });

  it('registerBatcher without forRoot, two processors for one batcher, and two roots are refused', async () => {
    const name = uniqueName('nest-err');
    @Module({ imports: [BatchByKeyModule.registerBatcher({ name })] })
    class NoRoot {}
    await expect(createContext(NoRoot)).rejects.toThrow(/needs BatchByKeyModule\.forRoot\(\) or forRootAsync\(\)/);

    @BatchProcessor(name)
    class One {
      eachIteration(): void {}
    }
    @BatchProcessor(name)
    class Two {
      eachIteration(): void {}
    }
    @Module({
      imports: [BatchByKeyModule.forRoot({ connection: testConnection() }), BatchByKeyModule.registerBatcher({ name })],
      providers: [One, Two],
    })
    class TwoProcessors {}
    await expect(createContext(TwoProcessors)).rejects.toThrow(/is on 2 providers \(One, Two\)/);

    @Module({ imports: [BatchByKeyModule.forRoot({ connection: testConnection() })] })
    class Feature {}
    @Module({ imports: [BatchByKeyModule.forRoot({ connection: testConnection() }), Feature] })
    class TwoRoots {}
    await expect(createContext(TwoRoots)).rejects.toThrow(/imported more than once/);
  });

  it('two modules registering one name share its batcher when the options agree, and are refused when they differ', async () => {
    const name = uniqueName('nest-share');
    const build = (second: { sliceSize: number }) => {
      @Injectable()
      class A {
        constructor(@InjectBatcher(name) readonly batcher: Batcher) {}
      }
      @Module({
        imports: [BatchByKeyModule.registerBatcher({ name, sliceSize: 10, backoff: { type: 'fixed', delayMs: 5 } })],
        providers: [A],
        exports: [A],
      })
      class FeatureA {}
      @Injectable()
      class B {
        constructor(@InjectBatcher(name) readonly batcher: Batcher) {}
      }
      @Module({
        imports: [BatchByKeyModule.registerBatcher({ name, ...second, backoff: { type: 'fixed', delayMs: 5 } })],
        providers: [B],
        exports: [B],
      })
      class FeatureB {}
      @Module({ imports: [BatchByKeyModule.forRoot({ connection: testConnection() }), FeatureA, FeatureB] })
      class AppModule {}
      return { AppModule, A, B };
    };

    const same = build({ sliceSize: 10 });
    const app = await createContext(same.AppModule);
    expect(app.get(same.A).batcher).toBe(app.get(same.B).batcher);

    const differ = build({ sliceSize: 20 });
    await expect(createContext(differ.AppModule)).rejects.toThrow(/'.+' is registered twice with different options/);
  });
});

describe('the core entry without NestJS', () => {
  it('importing batch-by-key loads no @nestjs package: it works where none is installed', async () => {
    // In a fresh process, @nestjs/* resolves to "not installed" and every attempt is recorded.
    const script = `
      const Module = require('node:module');
      const seen = [];
      const resolve = Module._resolveFilename;
      Module._resolveFilename = function (request, ...rest) {
        if (request.startsWith('@nestjs/')) {
          seen.push(request);
          throw Object.assign(new Error("Cannot find module '" + request + "'"), { code: 'MODULE_NOT_FOUND' });
        }
        return resolve.call(this, request, ...rest);
      };
      const core = require('./src/index.ts');
      const byCore = [...seen];
      let nestjs = 'loaded';
      try { require('./src/nestjs/index.ts'); } catch (err) { nestjs = err.code; }
      console.log(JSON.stringify({ batchByKey: typeof core.batchByKey, byCore, nestjs, seen }));
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '-e', script], { cwd: join(__dirname, '..') });
    const result = JSON.parse(stdout) as { batchByKey: string; byCore: string[]; nestjs: string; seen: string[] };
    expect(result.batchByKey).toBe('function');
    expect(result.byCore).toEqual([]);
    // The control: the same hook does see the subpath's imports.
    expect(result.nestjs).toBe('MODULE_NOT_FOUND');
    expect(result.seen).toContain('@nestjs/common');
  });
});

/**
 * batch-by-key in a NestJS application: a controller pushes segment ids per account, and a
 * @BatchProcessor refreshes them through an injected service, in the same process. Run it with
 * `npx tsx examples/nestjs.ts` against a Redis you run (REDIS_URL, default redis://localhost:6379;
 * PORT, default 3000), then
 *   curl -X POST localhost:3000/accounts/acct-42/segments/refresh -H 'content-type: application/json' -d '{"ids":[1,2,3]}'
 * Ctrl-C closes the app: running slices finish, the ids left wait in Redis for the next start.
 */
import {
  Body,
  Catch,
  Controller,
  HttpCode,
  Inject,
  Injectable,
  Logger,
  Module,
  Param,
  Post,
  type ArgumentsHost,
  type ExceptionFilter,
  type INestApplication,
  type NestApplicationOptions,
} from '@nestjs/common';
import { APP_FILTER, NestFactory } from '@nestjs/core';
import type { Response } from 'express';
import { pathToFileURL } from 'node:url';
import { BatchByKeyError, PermanentError, type Batcher, type BatcherEvents, type IterationContext } from 'batch-by-key';
import { BatchByKeyModule, BatchProcessor, InjectBatcher, OnBatchEvent } from 'batch-by-key/nestjs';
import { httpStatusOf } from './http-errors';

export const SEGMENTS = 'nest-segment-refresher';

/** The app's own service; here it keeps what was refreshed in memory instead of a database. */
@Injectable()
export class SegmentsService {
  readonly refreshed = new Map<string, Set<string>>();

  async refresh(account: string, segmentIds: string[], signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    const unknown = segmentIds.filter((id) => !/^\d+$/.test(id));
    // Retrying cannot fix a segment that does not exist: dead-letter it, refresh the others.
    if (unknown.length > 0) throw new PermanentError(`no such segment: ${unknown.join(', ')}`, { ids: unknown });
    const done = this.refreshed.get(account) ?? new Set<string>();
    for (const id of segmentIds) done.add(id);
    this.refreshed.set(account, done);
  }
}

@Controller('accounts/:account/segments')
export class SegmentsController {
  constructor(@InjectBatcher(SEGMENTS) private readonly segments: Batcher) {}

  @Post('refresh')
  @HttpCode(202)
  async refresh(@Param('account') account: string, @Body() body: { ids?: unknown } | undefined) {
    // Unchecked on purpose: the library validates ids and throws InvalidIdsError (a 400, below).
    const { key, pushed } = await this.segments.performBatchLater(body?.ids as ReadonlyArray<string | number>, { key: account });
    return { key, pushed };
  }
}

/**
 * Bad input is a 400 and Redis down or a shutdown a 503, each with the error's code (see
 * http-errors.ts); any other library error is logged and answered as Nest answers an unknown one.
 */
@Catch(BatchByKeyError)
export class BatchErrorsFilter implements ExceptionFilter {
  private readonly logger = new Logger(BatchErrorsFilter.name);
  catch(err: BatchByKeyError, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse<Response>();
    const status = httpStatusOf(err);
    if (status === 500) {
      this.logger.error(err.message, err.stack);
      response.status(500).json({ statusCode: 500, message: 'Internal server error' });
      return;
    }
    response.status(status).json({ error: { code: err.code, message: err.message } });
  }
}

// Constructor parameters name their tokens (@Inject(SegmentsService)): tsx compiles with esbuild,
// which emits no decorator metadata. Under the Nest CLI (tsc or SWC) the type alone would do.
@BatchProcessor(SEGMENTS, { concurrency: 4 })
export class SegmentRefreshProcessor {
  private readonly logger = new Logger(SegmentRefreshProcessor.name);

  constructor(@Inject(SegmentsService) private readonly segments: SegmentsService) {}

  async eachIteration(segmentIds: string[], ctx: IterationContext): Promise<void> {
    await this.segments.refresh(ctx.key, segmentIds, ctx.signal);
  }

  @OnBatchEvent('dead')
  onDead({ key, ids, error }: BatcherEvents['dead'][0]): void {
    this.logger.warn(`account ${key}: gave up on ${ids.join(', ')}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

@Module({
  imports: [
    BatchByKeyModule.forRoot({ connection: process.env.REDIS_URL ?? 'redis://localhost:6379' }),
    // set: a segment asked for twice before its refresh runs is refreshed once.
    BatchByKeyModule.registerBatcher({ name: SEGMENTS, store: 'set', sliceSize: 50 }),
  ],
  controllers: [SegmentsController],
  providers: [SegmentsService, SegmentRefreshProcessor, { provide: APP_FILTER, useClass: BatchErrorsFilter }],
})
export class AppModule {}

export async function bootstrap({
  port = 3000,
  logger,
}: { port?: number; logger?: NestApplicationOptions['logger'] } = {}): Promise<INestApplication> {
  const app = await NestFactory.create<INestApplication>(AppModule, logger === undefined ? {} : { logger });
  // SIGTERM and SIGINT run app.close(): the workers finish their running slices, then the batchers close.
  app.enableShutdownHooks();
  await app.listen(port);
  return app;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  bootstrap({ port: Number(process.env.PORT ?? 3000) })
    .then(async (app) => console.log(`listening on ${await app.getUrl()}`))
    .catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
}

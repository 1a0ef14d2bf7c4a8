/**
 * `batch-by-key/nestjs`: a Nest module over the core. `@nestjs/common` and `@nestjs/core` are
 * optional peer dependencies; only this entry loads them, so `batch-by-key` itself never does.
 */
export { BatchByKeyModule } from './module';
export { BatchProcessor, OnBatchEvent, InjectBatcher, getBatcherToken, type BatchHandler, type BatchWorkerEvent } from './decorators';
export type { BatchByKeyRootOptions, BatchByKeyRootAsyncOptions, RegisterBatcherOptions, RegisterBatcherAsyncOptions } from './options';

/**
 * bull-board beside our dashboard, both behind one Express app: bull-board for every job of every
 * queue, where a key's job shows its key, pending count and lag (bullBoardAdapters); our
 * dashboard for keys, lag and dead letters. Run it beside examples/worker.ts and push with
 * examples/server.ts: `REDIS_URL=redis://host:6379 npx tsx examples/bull-board.ts` (PORT
 * defaults to 3001), then open http://localhost:3001/admin/queues (bull-board, at its usual path)
 * and /admin/batch-by-key (ours). Mount both behind your own auth: neither authenticates anybody.
 */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import express from 'express';
import { pathToFileURL } from 'node:url';
import { bullBoardAdapters, dashboard } from 'batch-by-key';
import { SegmentRefresher } from './segment-refresher';

export function createBoardApp(): express.Express {
  const board = new ExpressAdapter();
  board.setBasePath('/admin/queues');
  createBullBoard({
    // Read-only: the board's buttons act on BullMQ jobs, not on a key's ids (the dashboard's do).
    queues: bullBoardAdapters(SegmentRefresher, BullMQAdapter, { readOnlyMode: true }),
    serverAdapter: board,
  });
  const app = express();
  app.use('/admin/queues', board.getRouter() as express.Router);
  app.use('/admin/batch-by-key', dashboard({ batchers: [SegmentRefresher] }));
  return app;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const port = Number(process.env.PORT ?? 3001);
  const server = createBoardApp().listen(port, () =>
    console.log(`bull-board on http://localhost:${port}/admin/queues, ours on /admin/batch-by-key`),
  );
  const stop = () => server.close(() => void SegmentRefresher.close().then(() => process.exit(0)));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

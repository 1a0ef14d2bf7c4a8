/**
 * An Express controller that pushes segment ids for the account of the request's
 * `x-account-id` header. It is a service, beside examples/worker.ts: run both against one Redis,
 * `REDIS_URL=redis://host:6379 npx tsx examples/server.ts` (REDIS_URL defaults to
 * redis://localhost:6379, which must be running; PORT to 3000), then
 *   curl -X POST localhost:3000/segments/refresh -H 'x-account-id: acct-42' -H 'content-type: application/json' -d '{"ids":[1,2,3]}'
 */
import express, { type ErrorRequestHandler, type Request, type RequestHandler } from 'express';
import { pathToFileURL } from 'node:url';
import { BatchByKeyError, withKey } from 'batch-by-key';
import { httpStatusOf } from './http-errors';
import { SegmentRefresher } from './segment-refresher';

/** Every request of an account runs inside withKey, so code below it can push without a key. */
const accountContext: RequestHandler = (req, _res, next) => {
  const account = req.get('x-account-id');
  // No header: no key. performBatchLater then throws MissingKeyError, answered with a 400 below.
  if (account === undefined) return next();
  withKey(account, next);
};

const refreshSegments: RequestHandler = async (req: Request<unknown, unknown, { ids?: unknown } | undefined>, res) => {
  // Unchecked on purpose: the library validates ids and throws InvalidIdsError before touching Redis.
  const ids = req.body?.ids as ReadonlyArray<string | number>;
  const { key, pushed } = await SegmentRefresher.performBatchLater(ids);
  res.status(202).json({ key, pushed });
};

/**
 * Bad input is a 400 and Redis down or a shutdown a 503, each with the error's code (see
 * http-errors.ts); any other error goes on to Express's handler, a 500 that shows the client nothing.
 */
const batchErrors: ErrorRequestHandler = (err, _req, res, next) => {
  if (!(err instanceof BatchByKeyError)) return next(err);
  const status = httpStatusOf(err);
  if (status === 500) return next(err);
  res.status(status).json({ error: { code: err.code, message: err.message } });
};

export function createApp(): express.Express {
  const app = express();
  // Parse before withKey: middleware resumed from stream events can drop the async context,
  // and with it the key (Express 5's body parser keeps it; other stream-based ones may not).
  app.use(express.json({ limit: '1mb' }));
  app.use(accountContext);
  app.post('/segments/refresh', refreshSegments);
  app.use(batchErrors);
  return app;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const port = Number(process.env.PORT ?? 3000);
  const server = createApp().listen(port, () => console.log(`listening on http://localhost:${port}`));
  const stop = () => server.close(() => void SegmentRefresher.close().then(() => process.exit(0)));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

import { afterEach } from 'vitest';
import { closeTracked } from './redis';

// Every test's batchers, workers and clients are closed after it, and must close promptly.
afterEach(async () => {
  await closeTracked();
});

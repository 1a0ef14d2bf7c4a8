import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { track } from './redis';

/** Serves `handler` on a free loopback port until the test ends (closed with the test's resources); its base URL. */
export async function serveLocally(handler: RequestListener): Promise<string> {
  const server: Server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  track({
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections(); // the browser's keep-alive connections
      }),
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

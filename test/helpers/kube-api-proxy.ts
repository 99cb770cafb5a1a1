/**
 * A plain-HTTP proxy in front of the test apiserver that lets a test act between a client's read
 * and its write: `beforePatch` runs (and is awaited) before a PATCH is passed on. That is how a test
 * makes "someone else changed the object meanwhile" happen at exactly the wrong moment.
 */
import { createServer, type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

export interface KubeApiProxy {
  url: string;
  /** Runs once before the next PATCH is forwarded, then clears itself. */
  beforePatch?: () => Promise<void>;
  close(): Promise<void>;
}

export async function startKubeApiProxy(server: string): Promise<KubeApiProxy> {
  const upstream = new URL(server);
  const proxy: KubeApiProxy = { url: '', close: async () => {} };
  const http = createServer(async (request: IncomingMessage, response) => {
    if (request.method === 'PATCH' && proxy.beforePatch) {
      const hook = proxy.beforePatch;
      proxy.beforePatch = undefined;
      await hook();
    }
    const forwarded = https.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        path: request.url,
        method: request.method,
        headers: { ...request.headers, host: upstream.host },
        rejectUnauthorized: false,
      },
      (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      },
    );
    forwarded.once('error', (error) => response.destroy(error));
    request.pipe(forwarded);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  proxy.close = () =>
    new Promise<void>((resolve) => {
      http.closeAllConnections();
      http.close(() => resolve());
    });
  return proxy;
}

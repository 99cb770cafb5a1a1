/**
 * Runs a service's app: listens, announces its URL on stdout as one JSON line (so that a parent
 * such as `berth up` can find a port chosen by the OS), and closes with grace on SIGINT/SIGTERM.
 */
import type { FastifyInstance } from 'fastify';
import { stopTracing } from './telemetry.js';

export interface ServeOptions {
  host: string;
  port: number;
  /** Runs after the server stops accepting requests. */
  onClose?: () => Promise<void> | void;
}

export async function serve(app: FastifyInstance, name: string, options: ServeOptions): Promise<string> {
  const url = await app.listen({ host: options.host, port: options.port });
  process.stdout.write(`${JSON.stringify({ service: name, url })}\n`);
  const stop = async () => {
    await app.close();
    await options.onClose?.();
    await stopTracing();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
  return url;
}

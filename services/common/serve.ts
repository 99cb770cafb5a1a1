/**
 * How a service's main runs it: it listens, announces its URL on stdout as one JSON line (so that
 * a parent such as `berth up` can find a port chosen by the OS), and closes with grace on SIGINT or
 * SIGTERM.
 */
import type { FastifyInstance } from 'fastify';
import { stopTracing } from './telemetry.js';

export interface ServeOptions {
  host: string;
  port: number;
  /** Runs after the server stops accepting requests. */
  onClose?: () => Promise<void> | void;
}

/** Listens, announces, and closes the app (then `onClose`) on SIGINT or SIGTERM; the URL it listens on. */
export async function serve(app: FastifyInstance, name: string, options: ServeOptions): Promise<string> {
  const url = await app.listen({ host: options.host, port: options.port });
  announce({ service: name, url });
  closeOnSignals(async () => {
    await app.close();
    await options.onClose?.();
  });
  return url;
}

/** The announcement: `service` and `url`, and whatever else a service says of itself, as one JSON line. */
export function announce(line: { service: string; url: string } & Record<string, string>): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

/**
 * On the first SIGINT or SIGTERM: `close`, then the traces flushed, then exit 0. A SIGTERM while
 * it closes changes nothing: a platform may repeat it while the process drains, and ends a drain
 * that takes too long with SIGKILL (Kubernetes after the grace period, `berth up` after its own).
 * A second SIGINT (Ctrl-C again) kills it at once, as if it had no handler.
 */
export function closeOnSignals(close: () => Promise<void>): void {
  let stopping = false;
  const stop = async () => {
    stopping = true;
    await close();
    await stopTracing();
    process.exit(0);
  };
  const onSigint = () => {
    if (!stopping) return void stop();
    process.off('SIGINT', onSigint);
    process.kill(process.pid, 'SIGINT');
  };
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', () => void (stopping || stop()));
}

/**
 * The embedded Temporal dev server (`temporal server start-dev`), for `berth up` and the tests.
 * With a CLI on this machine it runs as our own child process, its output kept off our stdout (so
 * `berth up --demo --json` prints only JSON); otherwise the Temporal SDK downloads and runs it.
 * It starts bare, as any Temporal deployment would be: Berth's workers register their search
 * attributes themselves.
 */
import { Connection } from '@temporalio/client';
import { TestWorkflowEnvironment, type EphemeralServerExecutable } from '@temporalio/testing';
import { freePort } from './free-port.js';
import { spawnTethered } from './tether.js';

export interface TemporalDevServerOptions {
  executable: EphemeralServerExecutable;
  /** @default '127.0.0.1' */
  ip?: string;
  /** gRPC port; 0 or unset: a free one, picked again at each start. */
  port?: number;
  /** Web UI port; 0: a free one, picked again at each start; unset: no UI. */
  uiPort?: number;
  /** SQLite file that keeps workflow history across restarts. @default in memory */
  dbFilename?: string;
  /** @default 'default' */
  namespace?: string;
  /** More `temporal server start-dev` arguments (tests use dynamic config). */
  extraArgs?: string[];
  /** How long the server may take to answer. @default 60000 */
  startTimeoutMs?: number;
}

export interface TemporalDevServer {
  /** host:port for clients and workers */
  address: string;
  /** The gRPC and Web UI ports it took: a restart that must keep its addresses asks for these. */
  port: number;
  uiPort?: number;
  namespace: string;
  /** Web UI URL, when the UI is on */
  uiUrl?: string;
  /** Settles when the server exits, stopped or not, with how it exited (never for the SDK's own server). */
  exited: Promise<string>;
  stop(): Promise<void>;
}

export async function startTemporalDevServer(options: TemporalDevServerOptions): Promise<TemporalDevServer> {
  const ip = options.ip ?? '127.0.0.1';
  const namespace = options.namespace ?? 'default';
  if (options.executable.type !== 'existing-path') {
    const uiPort = options.uiPort === 0 ? await freePort(ip) : options.uiPort;
    const env = await TestWorkflowEnvironment.createLocal({
      server: {
        executable: options.executable,
        ip,
        port: options.port || undefined,
        ui: uiPort !== undefined,
        uiPort,
        dbFilename: options.dbFilename,
        namespace,
        log: { format: 'pretty', level: 'error' },
        extraArgs: options.extraArgs,
      },
    });
    return {
      address: env.address,
      port: Number(env.address.slice(env.address.lastIndexOf(':') + 1)),
      uiPort,
      namespace,
      uiUrl: uiPort === undefined ? undefined : `http://${ip}:${uiPort}`,
      exited: new Promise(() => {}),
      stop: () => env.teardown(),
    };
  }

  // Another process may take a port between its pick and the dev server's bind: one the dev server
  // picks for its inner services (history, matching), or a free one picked here. That start is made
  // again, with free ports picked anew, three times at most.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options, options.executable.path, ip, namespace);
    } catch (error) {
      if (attempt === 3 || !(error instanceof PortTaken)) throw error;
    }
  }
}

/** The dev server failed to start because a port it picked was taken meanwhile. */
class PortTaken extends Error {}

async function startOnce(
  options: TemporalDevServerOptions,
  executable: string,
  ip: string,
  namespace: string,
): Promise<TemporalDevServer> {
  const port = options.port || (await freePort(ip));
  const uiPort = options.uiPort === 0 ? await freePort(ip) : options.uiPort;
  const args = [
    'server',
    'start-dev',
    '--ip',
    ip,
    '--port',
    String(port),
    '--namespace',
    namespace,
    '--log-level',
    'error',
    ...(uiPort === undefined ? ['--headless'] : ['--ui-port', String(uiPort)]),
    ...(options.dbFilename ? ['--db-filename', options.dbFilename] : []),
    ...(options.extraArgs ?? []),
  ];
  // On a tether: the dev server ends with the process that started it, even one killed with -9.
  const child = spawnTethered(executable, args, { stdout: 'ignore', stderr: 'pipe' });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code === null ? `signal ${signal}` : `code ${code}`)),
  );
  // 'exit' can come before the last of stderr has been read: 'close' comes after both (unless a
  // process the server left holds stderr open: a second is long enough for the rest).
  const closed = new Promise<void>((resolve) => {
    child.once('close', () => resolve());
    child.once('exit', () => setTimeout(resolve, 1_000).unref());
  });
  const address = `${ip}:${port}`;
  const deadline = Date.now() + (options.startTimeoutMs ?? 60_000);
  for (;;) {
    if (child.exitCode !== null) {
      await closed;
      const message = `temporal server start-dev exited with ${child.exitCode}: ${stderr.trim()}`;
      throw stderr.includes('address already in use') ? new PortTaken(message) : new Error(message);
    }
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      try {
        await connection.workflowService.describeNamespace({ namespace });
        break;
      } finally {
        await connection.close();
      }
    } catch (error) {
      if (Date.now() > deadline) {
        child.kill('SIGTERM');
        throw new Error(
          `temporal server start-dev did not answer on ${address} within ${options.startTimeoutMs ?? 60_000} ms: ${stderr.trim()}`,
          { cause: error },
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  return {
    address,
    port,
    uiPort,
    namespace,
    uiUrl: uiPort === undefined ? undefined : `http://${ip}:${uiPort}`,
    exited,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

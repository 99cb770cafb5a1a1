/** The embedded Temporal dev server (`temporal server start-dev`), for `berth up` and the tests. */
import { TestWorkflowEnvironment, type EphemeralServerExecutable } from '@temporalio/testing';
import { SEARCH_ATTRIBUTES } from '../../workflows/api.js';

export interface TemporalDevServerOptions {
  executable: EphemeralServerExecutable;
  /** @default '127.0.0.1' */
  ip?: string;
  /** gRPC port. @default a free port */
  port?: number;
  /** Web UI port; the UI is off when undefined. */
  uiPort?: number;
  /** SQLite file that keeps workflow history across restarts. @default in memory */
  dbFilename?: string;
  /** @default 'default' */
  namespace?: string;
  /** More `temporal server start-dev` arguments (tests use dynamic config). */
  extraArgs?: string[];
}

export interface TemporalDevServer {
  /** host:port for clients and workers */
  address: string;
  namespace: string;
  /** Web UI URL, when the UI is on */
  uiUrl?: string;
  stop(): Promise<void>;
}

export async function startTemporalDevServer(options: TemporalDevServerOptions): Promise<TemporalDevServer> {
  const ip = options.ip ?? '127.0.0.1';
  const namespace = options.namespace ?? 'default';
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: options.executable,
      ip,
      port: options.port,
      ui: options.uiPort !== undefined,
      uiPort: options.uiPort,
      dbFilename: options.dbFilename,
      namespace,
      // Berth's search attributes, so that `temporal workflow list --query` finds runs by table and partition.
      searchAttributes: Object.values(SEARCH_ATTRIBUTES),
      log: { format: 'pretty', level: 'error' },
      extraArgs: options.extraArgs,
    },
  });
  return {
    address: env.address,
    namespace,
    uiUrl: options.uiPort === undefined ? undefined : `http://${ip}:${options.uiPort}`,
    stop: () => env.teardown(),
  };
}

/**
 * The coordinator's PostgreSQL front door: a TCP listener whose connections are sessions
 * (session.ts), bounded in number per client address and in all, each closed when idle, and
 * reachable by its CancelRequest key. A connection past a bound is told why (53300) and closed.
 */
import { randomInt } from 'node:crypto';
import net from 'node:net';
import { createSecureContext } from 'node:tls';
import type { TableInfo } from '../../meta/client.js';
import * as out from './backend-messages.js';
import { ParameterBinder, type ParseTrees } from './bind-parameters.js';
import { PgCatalog } from './catalog.js';
import { scramSecret } from './scram.js';
import { Session, type QueryRunner } from './session.js';

/** The PostgreSQL version Berth reports: psql and drivers pick their catalog queries by it. */
export const SERVER_VERSION = '15.0';

export const POSTGRES_DEFAULTS = {
  port: 5433,
  maxConnections: 256,
  maxConnectionsPerClient: 128,
  idleTimeoutMs: 600_000,
  startupTimeoutMs: 10_000,
  maxMessageBytes: 8 * 1024 * 1024,
};

export interface PostgresFrontOptions {
  queries: QueryRunner;
  trees: ParseTrees;
  /** Berth's tables, for the catalog. */
  listTables(): Promise<TableInfo[]>;
  /** The password every client authenticates with. */
  token: string;
  host: string;
  /** 0: any free port. */
  port: number;
  /** @default 256 */
  maxConnections?: number;
  /** @default 128 */
  maxConnectionsPerClient?: number;
  /** @default 600000 */
  idleTimeoutMs?: number;
  /** @default 10000 */
  startupTimeoutMs?: number;
  /** @default 8 MiB */
  maxMessageBytes?: number;
  /** The coordinator's query deadline, which cuts catalog statements too. */
  queryDeadlineMs: number;
  /** A certificate and its key (PEM): an SSLRequest is then answered with TLS; without, refused ('N'). */
  tls?: { cert: string; key: string };
  log: { warn(object: object, message: string): void };
}

export interface PostgresFront {
  port: number;
  /** Open connections, for tests and metrics. */
  readonly connections: number;
  close(): Promise<void>;
}

export async function startPostgresFront(options: PostgresFrontOptions): Promise<PostgresFront> {
  const settings = { ...POSTGRES_DEFAULTS, ...withoutUndefined(options) };
  const secret = scramSecret(options.token);
  const binder = new ParameterBinder(options.trees);
  let catalog: Promise<PgCatalog> | undefined;
  const sessions = new Map<number, { secretKey: number; cancel(): void }>();
  const perClient = new Map<string, number>();
  const open = new Set<net.Socket>();
  let nextProcessId = 1;

  const context = {
    queries: options.queries,
    binder,
    catalog: () => {
      catalog ??= PgCatalog.open(options.listTables, SERVER_VERSION);
      catalog.catch(() => (catalog = undefined));
      return catalog;
    },
    secret,
    serverVersion: SERVER_VERSION,
    register: (cancel: () => void) => {
      const processId = nextProcessId++;
      const secretKey = randomInt(-0x80000000, 0x7fffffff);
      sessions.set(processId, { secretKey, cancel });
      return { processId, secretKey, forget: () => sessions.delete(processId) };
    },
    maxMessageBytes: settings.maxMessageBytes,
    idleTimeoutMs: settings.idleTimeoutMs,
    startupTimeoutMs: settings.startupTimeoutMs,
    deadlineMs: options.queryDeadlineMs,
    log: options.log,
    tls: options.tls && createSecureContext(options.tls),
  };

  const server = net.createServer((socket) => {
    const client = socket.remoteAddress ?? '';
    const fromClient = perClient.get(client) ?? 0;
    const refusal =
      open.size >= settings.maxConnections
        ? `sorry, too many clients already (BERTH_PG_MAX_CONNECTIONS: ${settings.maxConnections})`
        : fromClient >= settings.maxConnectionsPerClient
          ? `sorry, too many connections from ${client} (BERTH_PG_MAX_CONNECTIONS_PER_CLIENT: ${settings.maxConnectionsPerClient})`
          : undefined;
    if (refusal) {
      socket.on('error', () => {});
      socket.end(out.errorResponse({ severity: 'FATAL', code: '53300', message: refusal }));
      // A client that reads the refusal and keeps its end open must not hold the listener's close.
      setTimeout(() => socket.destroy(), 1_000).unref();
      return;
    }
    open.add(socket);
    perClient.set(client, fromClient + 1);
    socket.once('close', () => {
      open.delete(socket);
      const left = (perClient.get(client) ?? 1) - 1;
      if (left > 0) perClient.set(client, left);
      else perClient.delete(client);
    });
    const session = new Session(socket, context);
    session.onCancelRequest = (processId, secretKey) => {
      const target = sessions.get(processId);
      if (target && target.secretKey === secretKey) target.cancel();
    };
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    get connections() {
      return open.size;
    },
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of open) socket.destroy();
      await closed;
      (await catalog?.catch(() => undefined))?.close();
    },
  };
}

function withoutUndefined<T extends object>(object: T): Partial<T> {
  return Object.fromEntries(Object.entries(object).filter(([, v]) => v !== undefined)) as Partial<T>;
}

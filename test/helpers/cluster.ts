/**
 * A real cluster on loopback for tests: meta, query nodes and a coordinator, each listening on its
 * own free port and talking over HTTP, with a bucket of its own on the run's shared S3 API and short
 * poll intervals.
 */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { inject } from 'vitest';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { createS3Client, type S3Credentials } from '../../services/common/s3-client.js';
import {
  startCoordinator,
  type CoordinatorOptions,
  type RunningCoordinator,
} from '../../services/coordinator/coordinator.js';
import { buildMetaApp } from '../../services/meta/app.js';
import { MetaClient } from '../../services/meta/client.js';
import { SqliteMetaStore } from '../../services/meta/sqlite-store.js';
import { startQueryNode, type QueryNodeOptions, type RunningQueryNode } from '../../services/query-node/node.js';
import type { IngestResult } from '../../services/coordinator/ingest/ingest.js';
import type { QueryResult } from '../../services/coordinator/query-service.js';
import { eventNdjson } from './event-data.js';
import { signalGroup, spawnOwned } from './process-groups.js';

/** Long enough for the services' own check (32 bytes), as any real token must be. */
export const TOKEN = 'cluster-test-token-at-least-32-bytes-long';

export interface TestCluster {
  dir: string;
  metaUrl: string;
  meta: MetaClient;
  bucket: string;
  s3: { endpoint: string; credentials: S3Credentials };
  nodes: RunningQueryNode[];
  coordinator: RunningCoordinator;
  /** Starts another query node (a fresh cache dir unless one is given). */
  addNode(options?: Partial<QueryNodeOptions>): Promise<RunningQueryNode>;
  /** POSTs NDJSON rows to the coordinator's ingest endpoint, with the token unless `headers` replace it. */
  ingest(
    table: string,
    ndjson: Buffer | string,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: IngestResult & { message?: string } }>;
  /** Ingests `batches` consecutive batches of the event data set into `table`: one segment each. */
  ingestEvents(table: string, batches: number, rowsPerBatch: number): Promise<void>;
  /** POSTs SQL to the coordinator. */
  query(sql: string): Promise<{ status: number; body: QueryResult & { error?: string; message?: string } }>;
  /** Waits until the coordinator's member view lists exactly these node ids. */
  awaitMembers(ids: string[]): Promise<void>;
  /** Stops meta (its state stays), as an outage would. */
  stopMeta(): Promise<void>;
  /** Starts meta again on the same address, over the same state. */
  startMeta(): Promise<void>;
  close(): Promise<void>;
}

export interface ClusterOptions {
  /** vCPUs per node. */
  vcpus: number[];
  cacheBytes?: number;
  /** How long meta keeps a silent node among the members. @default 30000 */
  expiryMs?: number;
  /** Meta replicas already running, to use instead of one meta in this process over SQLite. */
  metaUrls?: string[];
  /** Coordinator settings: the heavy pool, the verdict, the limits, the serving group and its autoscaler. */
  coordinator?: Pick<
    CoordinatorOptions,
    | 'heavyPool'
    | 'verdictThresholds'
    | 'scanTimeoutMs'
    | 'queryDeadlineMs'
    | 'maxResultBytes'
    | 'servingScaler'
    | 'maxConcurrency'
    | 'maxQueueSize'
    | 'queueTimeoutMs'
    | 'group'
    | 'resultCacheBytes'
    | 'maxShipperBytes'
    | 'postgres'
    | 'broadcastLimits'
  >;
}

export const FAST = { heartbeatMs: 200, memberPollMs: 200, warmIntervalMs: 60_000 };

export async function startCluster(options: ClusterOptions): Promise<TestCluster> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-cluster-'));
  const store = options.metaUrls
    ? undefined
    : new SqliteMetaStore({
        file: path.join(dir, 'meta.sqlite'),
        heartbeatIntervalMs: FAST.heartbeatMs,
        expiryMs: options.expiryMs ?? 30_000,
      });
  let metaApp = store && buildMetaApp({ store, token: TOKEN, logger: false });
  const metaUrl = options.metaUrls?.join(',') ?? (await metaApp!.listen({ host: '127.0.0.1', port: 0 }));
  const meta = new MetaClient(metaUrl, TOKEN);
  const s3 = { endpoint: inject('s3Endpoint'), credentials: inject('s3Credentials') };
  // A bucket of its own: test files run side by side, and a janitor sweeping objects its meta does
  // not know must never see another cluster's segments.
  const bucket = `berth-${randomUUID()}`;
  const s3Client = createS3Client(s3);
  await s3Client.send(new CreateBucketCommand({ Bucket: bucket }));
  s3Client.destroy();
  let counter = 0;

  const addNode = async (extra: Partial<QueryNodeOptions> = {}) => {
    const node = await startQueryNode({
      cacheDir: path.join(dir, `node-${counter++}`),
      cacheBytes: options.cacheBytes ?? 512 * 1024 * 1024,
      metaUrl,
      token: TOKEN,
      s3,
      bucket,
      vcpus: 2,
      threads: 1,
      logger: false,
      ...FAST,
      ...extra,
    });
    await node.registered;
    cluster.nodes.push(node);
    return node;
  };

  // Tests send bursts (a whole corpus at once) to check answers, not admission: a line long enough
  // for them, and a wait in it that no loaded machine trips within a test's timeout (production's
  // 10 s is tuned for a serving tier); admission's own tests set theirs.
  const coordinator = await startCoordinator({
    workDir: path.join(dir, 'coordinator'),
    metaUrl,
    token: TOKEN,
    s3,
    bucket,
    memberPollMs: FAST.memberPollMs,
    maxIngestBytes: 8 * 1024 * 1024,
    maxQueueSize: 1_000,
    queueTimeoutMs: 300_000,
    logger: false,
    ...options.coordinator,
  });
  const cluster: TestCluster = {
    dir,
    metaUrl,
    meta,
    bucket,
    s3,
    nodes: [],
    coordinator,
    addNode,
    ingest: async (table, ndjson, headers = { authorization: `Bearer ${TOKEN}` }) => {
      const response = await fetch(`${coordinator.url}/v1/tables/${table}/rows`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-ndjson', ...headers },
        body: ndjson,
      });
      return { status: response.status, body: (await response.json()) as IngestResult & { message?: string } };
    },
    ingestEvents: async (table, batches, rowsPerBatch) => {
      for (let b = 0; b < batches; b++) {
        const { status, body } = await cluster.ingest(
          table,
          await eventNdjson(b * rowsPerBatch, (b + 1) * rowsPerBatch),
        );
        if (status !== 200) throw new Error(`ingest of batch ${b} answered ${status}: ${body.message}`);
      }
    },
    query: async (sql) => {
      const response = await fetch(`${coordinator.url}/v1/query`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ sql }),
      });
      return {
        status: response.status,
        body: (await response.json()) as QueryResult & { error?: string; message?: string },
      };
    },
    awaitMembers: async (ids) => {
      const want = [...ids].sort().join(',');
      // The coordinator and every one of those nodes agree: a node keeps only what its own view says it owns.
      const views = () => [coordinator.view, ...cluster.nodes.filter((n) => ids.includes(n.id)).map((n) => n.view)];
      for (;;) {
        await Promise.all(views().map((v) => v.refresh()));
        if (
          views().every(
            (v) =>
              (v.members ?? [])
                .map((m) => m.id)
                .sort()
                .join(',') === want,
          )
        )
          return;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    // The in-process meta only (not with metaUrls).
    stopMeta: async () => {
      await metaApp!.close();
    },
    startMeta: async () => {
      metaApp = buildMetaApp({ store: store!, token: TOKEN, logger: false });
      await metaApp.listen({ host: '127.0.0.1', port: Number(new URL(metaUrl).port) });
    },
    close: async () => {
      await coordinator.close();
      await Promise.all(cluster.nodes.map((n) => n.close().catch(() => {})));
      await metaApp?.close();
      await store?.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
  for (const vcpus of options.vcpus) await addNode({ vcpus });
  await cluster.awaitMembers(cluster.nodes.map((n) => n.id));
  return cluster;
}

/** What a service process needs to join a test cluster: meta, the token, the bucket. */
export const serviceEnv = (cluster: TestCluster): Record<string, string> => ({
  BERTH_META_URL: cluster.metaUrl,
  BERTH_TOKEN: TOKEN,
  BERTH_S3_ENDPOINT: cluster.s3.endpoint,
  BERTH_S3_ACCESS_KEY_ID: cluster.s3.credentials.accessKeyId,
  BERTH_S3_SECRET_ACCESS_KEY: cluster.s3.credentials.secretAccessKey,
  BERTH_S3_BUCKET: cluster.bucket,
});

/** A query node running as a process of its own (so that a test can stop or kill it for real). */
export interface NodeProcess {
  id: string;
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts a built service (`dist/services/NAME/main.js`) as a process of its own against a test
 * cluster, and waits for the line it announces itself with. Its stop is SIGKILL, as a crash (after
 * SIGCONT, should a test have stopped it).
 */
async function spawnService<Announced extends { url: string }>(
  cluster: TestCluster,
  name: string,
  env: Record<string, string>,
): Promise<Announced & { child: ChildProcess; stop(): Promise<void> }> {
  const child = spawnOwned(
    process.execPath,
    [fileURLToPath(new URL(`../../dist/services/${name}/main.js`, import.meta.url))],
    {
      env: {
        ...process.env,
        ...serviceEnv(cluster),
        BERTH_MEMBER_POLL_MS: String(FAST.memberPollMs),
        BERTH_DUCKDB_THREADS: '1',
        BERTH_LOG_LEVEL: 'warn',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const announced = await new Promise<Announced>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) => resolve(JSON.parse(line) as Announced));
    void exited.then(() => reject(new Error(`the ${name} process exited before it announced itself`)));
  });
  return {
    ...announced,
    child,
    stop: async () => {
      signalGroup(child, 'SIGCONT');
      signalGroup(child, 'SIGKILL');
      await exited;
    },
  };
}

/** Starts the built query node (`dist/services/query-node/main.js`) against a test cluster. */
export const spawnNodeProcess = (cluster: TestCluster, env: Record<string, string> = {}): Promise<NodeProcess> =>
  spawnService<{ id: string; url: string }>(cluster, 'query-node', {
    BERTH_NODE_CACHE_DIR: path.join(cluster.dir, `node-process-${randomUUID()}`),
    BERTH_HEARTBEAT_MS: String(FAST.heartbeatMs),
    BERTH_WARM_INTERVAL_MS: String(FAST.warmIntervalMs),
    ...env,
  });

/** A coordinator running as a process of its own (so that a test can kill it for real). */
export interface CoordinatorProcess {
  url: string;
  child: ChildProcess;
  /** SIGKILL, as a crash: nothing is closed or flushed. */
  stop(): Promise<void>;
}

/** Starts the built coordinator (`dist/services/coordinator/main.js`) against a test cluster, with `env` on top. */
export const spawnCoordinatorProcess = (
  cluster: TestCluster,
  env: Record<string, string> = {},
): Promise<CoordinatorProcess> =>
  spawnService<{ url: string }>(cluster, 'coordinator', {
    BERTH_COORDINATOR_DIR: path.join(cluster.dir, `coordinator-process-${randomUUID()}`),
    BERTH_COORDINATOR_PORT: '0',
    BERTH_PG_PORT: '0', // not PostgreSQL's default: another test file's coordinator may hold it
    ...env,
  });

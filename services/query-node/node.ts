/** Composes a running query node: identity, cache, DuckDB, meta registration, member view, warmer, HTTP. */
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { DEFAULT_HOST, DEFAULT_SERVING_GROUP } from '../common/config.js';
import { openSandboxedDuckDB } from '../common/duckdb.js';
import { MemberView } from '../common/member-view.js';
import { createS3Client, type S3Config } from '../common/s3-client.js';
import { MetaClient } from '../meta/client.js';
import { buildQueryNodeApp } from './app.js';
import { runCanary } from './canary.js';
import { startHeartbeats } from './heartbeat.js';
import { loadOrCreateNodeId } from './identity.js';
import { Scanner } from '../common/scanner.js';
import { SegmentCache } from './segment-cache.js';
import { DEFAULT_CACHE_BYTES, DEFAULT_MEMORY_BYTES } from './config.js';
import { SegmentMemory } from './segment-memory.js';
import { SegmentSchemas } from './segment-schema.js';
import { detectVcpus } from './vcpus.js';
import { Warmer } from './warmer.js';
import { FinalStages } from './final-stages.js';
import { FinalStageEngine, type FinalStageSettings } from '../common/final-stage/engine.js';

export interface QueryNodeOptions {
  /** Holds the node's identity and its cached segments. */
  cacheDir: string;
  /** @default 1 GiB */
  cacheBytes?: number;
  /** Memory for owned segments scanned again, held as DuckDB tables; 0 turns the tier off. @default 256 MiB */
  memoryBytes?: number;
  /** @default 'serving' */
  group?: string;
  /** @default '127.0.0.1' */
  host?: string;
  /** @default 0 (any free port) */
  port?: number;
  /** The URL other services reach this node at, when it differs from where it listens (containers). */
  advertiseUrl?: string;
  metaUrl: string;
  token: string;
  s3: S3Config;
  bucket: string;
  /** Declared vCPUs instead of the detected quota (tests and demos). */
  vcpus?: number;
  /** @default 5000 */
  heartbeatMs?: number;
  /** @default 10000 */
  memberPollMs?: number;
  /** @default 10000 */
  warmIntervalMs?: number;
  /** DuckDB threads. @default the declared vCPUs, rounded up */
  threads?: number;
  /** DuckDB memory limit, e.g. '2GB'. */
  memoryLimit?: string;
  /** The limits of the DuckDB that runs heavy final stages here. @default memoryLimit, and DuckDB's temp-directory limit */
  finalStage?: Pick<FinalStageSettings, 'memoryLimit' | 'tempDirectoryLimit'>;
  /** @default true */
  logger?: boolean;
}

export interface RunningQueryNode {
  id: string;
  url: string;
  /** Holds the node's identity and its cache: a restart on it is the same node, warm. */
  cacheDir: string;
  cache: SegmentCache;
  memory: SegmentMemory;
  view: MemberView;
  warmer: Warmer;
  /** Resolves once meta has the node. */
  registered: Promise<void>;
  /** Stops the node; it leaves meta's members at once unless `deregister` is false (a crash, in tests). */
  close(options?: { deregister?: boolean }): Promise<void>;
}

export async function startQueryNode(config: QueryNodeOptions): Promise<RunningQueryNode> {
  const startedAt = Date.now();
  const group = config.group ?? DEFAULT_SERVING_GROUP;
  const id = await loadOrCreateNodeId(config.cacheDir);
  const segmentsDir = path.join(config.cacheDir, 'segments');
  const scratchDir = path.join(config.cacheDir, 'scratch');
  await rm(scratchDir, { recursive: true, force: true });
  await mkdir(path.join(scratchDir, 'spill'), { recursive: true });

  const vcpus = async () => config.vcpus ?? (await detectVcpus()).vcpus;
  const s3 = createS3Client(config.s3);
  const duckdb = await openSandboxedDuckDB({
    allowedDirectories: [segmentsDir, scratchDir],
    tempDirectory: path.join(scratchDir, 'spill'),
    threads: config.threads ?? Math.ceil(await vcpus()),
    memoryLimit: config.memoryLimit,
    // A segment's file only ever holds its one object (in part or whole): its footer never changes.
    cacheParquetFooters: true,
  });
  const cache = await SegmentCache.open({
    dir: segmentsDir,
    budgetBytes: config.cacheBytes ?? DEFAULT_CACHE_BYTES,
    s3,
    bucket: config.bucket,
    profiles: config.s3.profiles,
    duckdb,
  });
  const memory = await SegmentMemory.open({
    duckdb,
    budgetBytes: config.memoryBytes ?? DEFAULT_MEMORY_BYTES,
    onError: (error, segment) => app.log.warn({ err: error, segment }, 'loading a segment into memory failed'),
  });
  const meta = new MetaClient(config.metaUrl, config.token);
  // Background loops report their failures to the app's log (it exists by the time they run).
  const view = new MemberView({
    meta,
    group,
    pollMs: config.memberPollMs,
    onError: (error) => app.log.warn({ err: error }, 'reading the member list failed'),
  });
  const warmer = new Warmer({
    nodeId: id,
    meta,
    view,
    cache,
    intervalMs: config.warmIntervalMs,
    onError: (error) => app.log.warn({ err: error }, 'a warm pass failed'),
  });
  let isRegistered = false;
  const scanner = new Scanner(duckdb);
  // Opened by the first heavy final stage sent here: most nodes never run one.
  const finalStages = new FinalStages(async () =>
    FinalStageEngine.open(path.join(config.cacheDir, 'final-stage'), {
      threads: config.threads ?? Math.ceil(await vcpus()),
      memoryLimit: config.memoryLimit,
      ...config.finalStage,
    }),
  );
  const app = buildQueryNodeApp({
    nodeId: id,
    group,
    token: config.token,
    cache,
    memory,
    schemas: new SegmentSchemas(duckdb),
    scanner,
    view,
    warmer,
    canary: () => runCanary({ s3, bucket: config.bucket, duckdb, scratchDir }),
    isRegistered: () => isRegistered,
    finalStages,
    logger: config.logger,
  });
  const listening = await app.listen({ host: config.host ?? DEFAULT_HOST, port: config.port ?? 0 });
  const url = config.advertiseUrl ?? listening;

  const heartbeats = startHeartbeats({
    meta,
    node: { id, group, url, startedAt },
    vcpus,
    intervalMs: config.heartbeatMs,
    onError: (error) => app.log.warn({ err: error }, 'heartbeat failed'),
  });
  const registered = heartbeats.registered.then(async () => {
    isRegistered = true;
    await view.refresh().catch(() => {});
  });
  view.start();
  warmer.start();

  return {
    id,
    url,
    cacheDir: config.cacheDir,
    cache,
    memory,
    view,
    warmer,
    registered,
    close: async ({ deregister = true } = {}) => {
      heartbeats.stop();
      // A graceful stop is a departure: say so, so that readers move its work now rather than after
      // the expiry. A crash says nothing, and the expiry covers it.
      if (deregister) await meta.deregisterNode(id).catch(() => {});
      view.stop();
      warmer.stop();
      await app.close();
      await finalStages.closeAll();
      await memory.close();
      scanner.close();
      duckdb.closeSync();
      s3.destroy();
    },
  };
}

/** Composes a running coordinator: SQL engine, planner, member view, scatter, ingest, HTTP. */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { VerdictThresholds } from '../../core/routing-verdict.js';
import { HeadBucketCommand } from '@aws-sdk/client-s3';
import { Client, Connection } from '@temporalio/client';
import { poolSettings, poolWorkflowId, type PoolConfig } from '../../workflows/contracts/heavy-pool.js';
import type { ServingScalerConfig } from '../../workflows/contracts/serving-scaler.js';
import { DEFAULT_HOST, DEFAULT_SERVING_GROUP } from '../common/config.js';
import { MemberView } from '../common/member-view.js';
import { poolStatus, readAdmission, reportDemand } from '../../workflows/pool-client.js';
import { reportServingLoad } from '../../workflows/serving-scaler-client.js';
import { createS3Client, type S3Config } from '../common/s3-client.js';
import { SegmentObjects } from '../common/segment-objects.js';
import { tracingClientInterceptors } from '../common/temporal-tracing.js';
import { MetaClient } from '../meta/client.js';
import { buildCoordinatorApp } from './app.js';
import { consoleRoutes } from './console/console-routes.js';
import { HeavyAdmission } from './admission/heavy-admission.js';
import { Attacher } from './ingest/attach.js';
import { Ingestor } from './ingest/ingest.js';
import { PlanCache } from './planning/plan-cache.js';
import { DEFAULT_RESULT_CACHE_BYTES, ResultCache } from './execution/result-cache.js';
import { Planner } from './planning/planner.js';
import {
  DEFAULT_MAX_RESULT_BYTES,
  DEFAULT_QUERY_DEADLINE_MS,
  QueryService,
  type BroadcastLimits,
  type HeavyPool,
} from './query-service.js';
import { DEFAULT_SCAN_TIMEOUT_MS, Scatter } from './execution/scatter.js';
import { SegmentWriter } from './ingest/segment-writer.js';
import { ServingLoadReporter } from './admission/serving-load.js';
import { SqlEngine } from './sql-engine.js';
import { TableCatalog } from './planning/table-catalog.js';
import { startPostgresFront, type PostgresFront } from './postgres/server.js';

/** How long /readyz waits on each dependency. */
const READINESS_TIMEOUT_MS = 5_000;

export interface CoordinatorOptions {
  /** Scratch space for partial results and ingest batches (emptied at start). */
  workDir: string;
  metaUrl: string;
  token: string;
  s3: S3Config;
  bucket: string;
  /** The group light queries run on. @default 'serving' */
  group?: string;
  /**
   * The elastic heavy pool: heavy queries are admitted by its workflow (which launches it) and run
   * on its group's proven backends. Temporal is reached lazily: light queries never need it.
   */
  heavyPool?: {
    temporalAddress: string;
    namespace?: string;
    taskQueue?: string;
    /** The scan group: scan-bound verdicts, and memory-bound ones when there is no `memory` group. */
    config: PoolConfig;
    /** The memory class: memory-bound verdicts run on its one big backend (scale up, not out). */
    memory?: PoolConfig;
    /** A heavy query waiting longer than this is answered 503 with what the pool waits for. @default 1200000 */
    queueTimeoutMs?: number;
    /** How often waiting heavy queries read their admission. @default 250 */
    admissionPollMs?: number;
    /** How long one call to Temporal may take before the pool counts as unreachable. @default 10000 */
    callTimeoutMs?: number;
  };
  /**
   * The serving autoscaler (opt-in): this coordinator reports its serving queue to its workflow,
   * which scales the serving group.
   */
  servingScaler?: {
    temporalAddress: string;
    namespace?: string;
    taskQueue?: string;
    config: ServingScalerConfig;
    /** How often a coordinator with queries reports them. @default 5000 */
    reportEveryMs?: number;
  };
  /** Query node URLs to spread work over round-robin before any member list arrives. */
  seedNodes?: string[];
  /** @default 10000 */
  memberPollMs?: number;
  /** Queries running at once on the serving group. @default 16 */
  maxConcurrency?: number;
  /** Queries waiting for the serving group; past them, 429 with Retry-After. @default 16 */
  maxQueueSize?: number;
  /** Longest wait for the serving group; past it, 429 with Retry-After. @default 10000 */
  queueTimeoutMs?: number;
  /** Plans kept for queries sent again (plan-cache.ts); 0 turns the cache off. @default 1000 */
  planCacheSize?: number;
  /** JSON bytes of answers kept for queries asked again over unchanged tables (result-cache.ts); 0 turns it off. @default 0 */
  resultCacheBytes?: number;
  /** When a join's small tables are broadcast to the owners of its big one (query-service.ts). @default DEFAULT_BROADCAST_LIMITS */
  broadcastLimits?: BroadcastLimits;
  /** Scan-stage rows held in memory for final stages, over every query; past it they go to DuckDB tables. @default 64 MiB */
  exchangeMemoryBytes?: number;
  /** When a query is heavy. @default DEFAULT_VERDICT_THRESHOLDS */
  verdictThresholds?: VerdictThresholds;
  /** @default '127.0.0.1' */
  host?: string;
  /** @default 0 (any free port) */
  port?: number;
  /** How long one node may take before its work goes to the next; kept below the deadline. @default 120000 */
  scanTimeoutMs?: number;
  /** How long a query may take in all. @default 300000 */
  queryDeadlineMs?: number;
  /** Largest query result, as JSON (and as Arrow IPC from each node). @default 256 MiB */
  maxResultBytes?: number;
  /** DuckDB's memory limit for each of the coordinator's two engines, e.g. '2GB' or '25%'. @default memoryLimitOf(undefined) */
  memoryLimit?: string;
  /** Threads of the DuckDB that runs final stages. @default the machine's cores */
  threads?: number;
  /** Deepest nesting an ingested row may have. @default 64 */
  maxIngestDepth?: number;
  /** Largest NDJSON batch one ingest call takes. @default 256 MiB */
  maxIngestBytes?: number;
  /** Largest body of a log shipper's request (`_bulk`, OTLP), as sent and decompressed. @default 100 MiB */
  maxShipperBytes?: number;
  /** How long ingest's best-effort push to a segment's owner may hold its commit back. @default 5000 */
  pushTimeoutMs?: number;
  /** Answered queries the query log keeps for compute concentration. @default 10000 */
  queryLogSize?: number;
  /**
   * The PostgreSQL front door (postgres/): its port (0: any free one) and bounds; without it, the
   * coordinator speaks HTTP only.
   */
  postgres?: {
    port: number;
    maxConnections?: number;
    maxConnectionsPerClient?: number;
    idleTimeoutMs?: number;
    /** A certificate and its key (PEM) for TLS; without them an SSLRequest is refused. */
    tls?: { cert: string; key: string };
  };
  /** The console's links: the heavy pools' controller (their status) and the Temporal Web UI (their workflows). */
  console?: { controllerUrl?: string; temporalUi?: string };
  /** @default true */
  logger?: boolean;
}

export interface RunningCoordinator {
  url: string;
  /** The PostgreSQL front door's URL (postgres://HOST:PORT/berth), when it listens. */
  postgresUrl?: string;
  view: MemberView;
  queries: QueryService;
  close(): Promise<void>;
}

export async function startCoordinator(config: CoordinatorOptions): Promise<RunningCoordinator> {
  const engine = await SqlEngine.open(path.join(config.workDir, 'scratch'), {
    memoryLimit: config.memoryLimit,
    threads: config.threads,
    exchangeMemoryBytes: config.exchangeMemoryBytes,
  });
  const writer = await SegmentWriter.open(path.join(config.workDir, 'ingest'), { memoryLimit: config.memoryLimit });
  const meta = new MetaClient(config.metaUrl, config.token);
  const servingGroup = config.group ?? DEFAULT_SERVING_GROUP;
  // Background loops report their failures to the app's log (it exists by the time they run).
  const logFailure = (what: string) => (error: Error) => app.log.warn({ err: error }, what);
  const view = new MemberView({
    meta,
    group: servingGroup,
    pollMs: config.memberPollMs,
    onError: logFailure('reading the member list failed'),
  });
  const views = [view];
  const deadlineMs = config.queryDeadlineMs ?? DEFAULT_QUERY_DEADLINE_MS;
  const maxResultBytes = config.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
  // A node's timeout past the deadline would never fire: the deadline governs then.
  const scanTimeoutMs = Math.min(config.scanTimeoutMs ?? DEFAULT_SCAN_TIMEOUT_MS, deadlineMs);
  const scatterOver = (v: MemberView, seedNodes: string[]) =>
    new Scatter({ view: v, seedNodes, token: config.token, scanTimeoutMs, maxResultBytes });
  const scatters = new Map([[servingGroup, scatterOver(view, config.seedNodes ?? [])]]);

  let heavyPool: HeavyPool | undefined;
  let memoryPool: HeavyPool | undefined;
  let temporal: Connection | undefined;
  if (config.heavyPool) {
    const { temporalAddress, namespace, taskQueue, callTimeoutMs } = config.heavyPool;
    temporal = Connection.lazy({ address: temporalAddress });
    const client = new Client({ connection: temporal, namespace, interceptors: tracingClientInterceptors() });
    const coordinator = `coordinator-${randomUUID()}`;
    const deadline = <T>(call: () => Promise<T>) => client.withDeadline(Date.now() + (callTimeoutMs ?? 10_000), call);
    /** One heavy group as the queries see it: its member view, its scatter, its admission. */
    const heavyGroup = (pool: PoolConfig): HeavyPool => {
      const settings = poolSettings(pool);
      const poolView = new MemberView({
        meta,
        group: pool.group,
        pollMs: config.memberPollMs,
        onError: logFailure(`reading the member list of heavy group ${pool.group} failed`),
      });
      views.push(poolView);
      scatters.set(pool.group, scatterOver(poolView, []));
      const options = { client, config: pool, taskQueue };
      const admission = new HeavyAdmission({
        gate: {
          describe: temporalAddress,
          report: (counts) => deadline(() => reportDemand(options, { coordinator, ...counts })),
          read: () => deadline(() => readAdmission(options, coordinator)),
        },
        maxQueueSize: settings.maxQueueSize,
        queueTimeoutMs: config.heavyPool!.queueTimeoutMs,
        pollMs: config.heavyPool!.admissionPollMs,
        heartbeatMs: settings.reportTtlMs / 3,
        onError: logFailure(`reporting to heavy group ${pool.group} failed`),
      });
      return {
        group: pool.group,
        workflowId: poolWorkflowId(pool.group),
        admission,
        workload: async () => {
          const status = await deadline(() => poolStatus({ ...options, group: pool.group }));
          return {
            name: pool.group,
            running: status.running,
            waiting: status.waiting,
            maxConcurrency: status.maxConcurrency,
            maxQueueSize: status.maxQueueSize,
          };
        },
      };
    };
    heavyPool = heavyGroup(config.heavyPool.config);
    if (config.heavyPool.memory)
      memoryPool = heavyGroup({ ...config.heavyPool.memory, increment: 1, bottleneck: 'memory' });
  }

  const s3 = createS3Client(config.s3);
  const catalog = new TableCatalog(meta);
  const queries = new QueryService({
    plans: new PlanCache({
      planner: new Planner(engine, async (name) => (await catalog.table(name))?.info),
      engine,
      catalog,
      maxEntries: config.planCacheSize,
    }),
    results: new ResultCache(config.resultCacheBytes ?? DEFAULT_RESULT_CACHE_BYTES),
    catalog,
    engine,
    scatters,
    servingGroup,
    heavyPool,
    memoryPool,
    maxConcurrency: config.maxConcurrency,
    maxQueueSize: config.maxQueueSize,
    queueTimeoutMs: config.queueTimeoutMs,
    verdictThresholds: config.verdictThresholds,
    deadlineMs,
    maxResultBytes,
    token: config.token,
    broadcastLimits: config.broadcastLimits,
  });
  let servingLoad: ServingLoadReporter | undefined;
  if (config.servingScaler) {
    const { temporalAddress, namespace, taskQueue, config: scaler } = config.servingScaler;
    temporal ??= Connection.lazy({ address: temporalAddress });
    const options = { client: new Client({ connection: temporal, namespace }), config: scaler, taskQueue };
    const coordinator = `coordinator-${randomUUID()}`;
    servingLoad = new ServingLoadReporter({
      read: () => queries.servingLoad(),
      send: (load) => reportServingLoad(options, { coordinator, ...load }),
      everyMs: config.servingScaler.reportEveryMs,
      onError: logFailure('reporting the serving load failed'),
    });
  }

  const ingestor = new Ingestor({
    writer,
    meta,
    view,
    s3,
    bucket: config.bucket,
    token: config.token,
    maxDepth: config.maxIngestDepth,
    s3TimeoutMs: config.s3.timeoutMs,
    pushTimeoutMs: config.pushTimeoutMs,
  });
  const objects = new SegmentObjects({ s3, bucket: config.bucket, config: config.s3 });
  const app = buildCoordinatorApp({
    queries,
    ingestor,
    attacher: new Attacher({ meta, objects, writer }),
    finalStages: engine,
    binder: engine,
    meta,
    view,
    token: config.token,
    maxIngestBytes: config.maxIngestBytes,
    maxShipperBytes: config.maxShipperBytes,
    maxIngestDepth: config.maxIngestDepth,
    queryLogSize: config.queryLogSize,
    dependencies: [
      {
        name: 's3',
        required: true,
        check: () =>
          s3.send(new HeadBucketCommand({ Bucket: config.bucket }), {
            abortSignal: AbortSignal.timeout(READINESS_TIMEOUT_MS),
          }),
      },
      ...(temporal
        ? [
            {
              name: 'temporal',
              required: false,
              check: () =>
                temporal!.withDeadline(Date.now() + READINESS_TIMEOUT_MS, () => temporal!.healthService.check({})),
            },
          ]
        : []),
    ],
    logger: config.logger,
  });
  let url = '';
  void app.register(consoleRoutes, {
    token: config.token,
    selfUrl: () => url,
    ...config.console,
    namespace: config.heavyPool?.namespace ?? 'default',
    heavyGroups: [config.heavyPool?.config.group, config.heavyPool?.memory?.group].filter((g) => g !== undefined),
    metaUrls: meta.urls,
  });
  const host = config.host ?? DEFAULT_HOST;
  url = await app.listen({ host, port: config.port ?? 0 });
  let postgres: PostgresFront | undefined;
  if (config.postgres) {
    postgres = await startPostgresFront({
      ...config.postgres,
      queries,
      trees: engine,
      listTables: () => meta.listTables(),
      token: config.token,
      queryDeadlineMs: deadlineMs,
      host,
      log: app.log,
    }).catch(async (error: unknown) => {
      await app.close();
      throw new Error(`the PostgreSQL front could not listen on ${host}:${config.postgres!.port}`, { cause: error });
    });
  }
  for (const v of views) v.start();
  servingLoad?.start();
  return {
    url,
    ...(postgres ? { postgresUrl: `postgres://${host}:${postgres.port}/berth` } : {}),
    view,
    queries,
    close: async () => {
      await postgres?.close();
      for (const v of views) v.stop();
      servingLoad?.stop();
      heavyPool?.admission.close();
      memoryPool?.admission.close();
      await app.close();
      await temporal?.close();
      engine.close();
      writer.close();
      objects.close();
      s3.destroy();
    },
  };
}

/**
 * The composition root of a Berth worker: builds the real clients and the activities around them,
 * registers Berth's search attributes, and runs two Temporal workers on one connection: pool
 * control (the heavy pool's workflow and activities, its preflight, the serving autoscaler: all that
 * drives the platform) on the base task queue, and merges, the janitor, retention, table drops and
 * deletes by predicate on their own queue with their own slots, so that a long merge never delays a launch.
 * Shutdown is graceful: in-flight activities get a grace time to finish, then are cancelled.
 * At its start it also mends, in the background, tables an earlier Berth typed with what Parquet
 * cannot hold (activities/legacy-types.ts), and logs what it found.
 */
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import pino from 'pino';
import {
  createHeavyPoolActivities,
  createJanitorActivities,
  createRetentionActivities,
  createMergeActivities,
  createPreflightActivities,
  createServingScalerActivities,
  createRowDeleteActivities,
  createTableDropActivities,
} from '../activities/index.js';
import { checkLegacyTypes } from '../activities/legacy-types.js';
import type { ComputePlatform } from '../activities/platform/compute-platform.js';
import { DEFAULT_TEMPORAL_NAMESPACE } from '../services/common/config.js';
import { openSandboxedDuckDB } from '../services/common/duckdb.js';
import { loggerOptions } from '../services/common/logger.js';
import { createS3Client, type S3Config } from '../services/common/s3-client.js';
import { MetaClient } from '../services/meta/client.js';
import { mergeTaskQueueFor, TASK_QUEUE } from '../workflows/contracts/shared.js';
import { registerSearchAttributesOrWarn } from './search-attributes.js';
import { workerTracingOptions } from './tracing.js';

export interface BerthWorkerConfig {
  temporalAddress: string;
  /** @default 'default' */
  namespace?: string;
  /** The base task queue: pool control polls it, merges and the janitor poll `mergeTaskQueueFor(it)`. @default 'berth' */
  taskQueue?: string;
  /** The workflow code: a path to workflows/index, or a bundle (production: the one `npm run build` writes). */
  workflows: Pick<WorkerOptions, 'workflowsPath' | 'workflowBundle'>;
  metaUrl: string;
  token: string;
  s3: S3Config;
  bucket: string;
  /** Scratch space for merges (emptied at start). */
  workDir: string;
  /** The group whose owners receive merged segments. @default 'serving' */
  servingGroup?: string;
  /** The heavy pool's platform driver; no pool control without it. */
  heavyPool?: { platform: ComputePlatform };
  /** The platform driver that scales the serving group (opt-in); no serving autoscaler without it. */
  servingScaler?: { platform: ComputePlatform };
  /** Merge and janitor steps that run at once (each merge holds its inputs on disk and a DuckDB query). @default 2 */
  mergeConcurrency?: number;
  /** After shutdown begins, how long in-flight activities may run before they are cancelled. @default 20000 */
  shutdownGraceMs?: number;
  /** Where the worker logs what it finds and mends at its start. @default pino, as every service logs */
  log?: Pick<pino.Logger, 'info' | 'warn'>;
}

/** The defaults of the settings above that the worker's configuration (config.ts) also offers. */
export const WORKER_DEFAULTS = { mergeConcurrency: 2, shutdownGraceMs: 20_000 };

export interface BerthWorker {
  /** Pool control (only with a heavy pool) and merges. */
  workers: { pool?: Worker; merge: Worker };
  /** Runs until shutdown, then closes every client. */
  run(): Promise<void>;
  /** Begins a graceful shutdown; `run()` resolves when it is over. */
  shutdown(): void;
}

export async function createBerthWorker(config: BerthWorkerConfig): Promise<BerthWorker> {
  await rm(config.workDir, { recursive: true, force: true });
  await mkdir(path.join(config.workDir, 'spill'), { recursive: true });
  const namespace = config.namespace ?? DEFAULT_TEMPORAL_NAMESPACE;
  const taskQueue = config.taskQueue ?? TASK_QUEUE;
  const s3 = createS3Client(config.s3);
  const meta = new MetaClient(config.metaUrl, config.token);
  const duckdb = await openSandboxedDuckDB({
    allowedDirectories: [config.workDir],
    tempDirectory: path.join(config.workDir, 'spill'),
  });
  const storage = { s3, bucket: config.bucket, duckdb, workDir: config.workDir };
  const connection = await NativeConnection.connect({ address: config.temporalAddress });
  const legacy = new AbortController();
  let legacyCheck: Promise<void> = Promise.resolve();
  const closeAll = async () => {
    legacy.abort();
    await legacyCheck; // it reads footers with this DuckDB: done before it closes
    await connection.close();
    duckdb.closeSync();
    s3.destroy();
  };
  const graceMs = config.shutdownGraceMs ?? WORKER_DEFAULTS.shutdownGraceMs;
  // Past the grace time, cancelled activities get a few seconds to stop; then the worker stops anyway.
  const common = {
    connection,
    namespace,
    ...config.workflows,
    ...workerTracingOptions(),
    shutdownGraceTime: graceMs,
    shutdownForceTime: graceMs + 5_000,
  };

  let workers: BerthWorker['workers'];
  try {
    // Before any workflow this worker runs (or schedule it keeps) sets them.
    await registerSearchAttributesOrWarn(connection, namespace);
    // Merges and deletes by predicate rewrite segments alike.
    const dataDeps = {
      s3,
      bucket: config.bucket,
      meta,
      token: config.token,
      duckdb,
      workDir: config.workDir,
      group: config.servingGroup,
      profiles: config.s3.profiles,
    };
    const merge = await Worker.create({
      ...common,
      taskQueue: mergeTaskQueueFor(taskQueue),
      maxConcurrentActivityTaskExecutions: config.mergeConcurrency ?? WORKER_DEFAULTS.mergeConcurrency,
      activities: {
        ...createMergeActivities(dataDeps),
        ...createRowDeleteActivities(dataDeps),
        ...createJanitorActivities({ s3, bucket: config.bucket, meta }),
        ...createRetentionActivities({ meta }),
        ...createTableDropActivities({ meta }),
      },
    });
    // Pool control: the heavy pool, its preflight, and the serving autoscaler, all on the platform.
    const pool =
      config.heavyPool || config.servingScaler
        ? await Worker.create({
            ...common,
            taskQueue,
            activities: {
              ...(config.heavyPool
                ? {
                    ...createHeavyPoolActivities({
                      platform: config.heavyPool.platform,
                      meta,
                      token: config.token,
                      storage,
                    }),
                    ...createPreflightActivities({ platform: config.heavyPool.platform, meta, storage }),
                  }
                : {}),
              ...(config.servingScaler
                ? createServingScalerActivities({ platform: config.servingScaler.platform, meta })
                : {}),
            },
          })
        : undefined;
    workers = { merge, pool };
  } catch (error) {
    await closeAll();
    throw error;
  }
  // Tables an earlier Berth typed with what Parquet cannot hold are mended at every start, in the
  // background: a failure is logged, and the worker runs on (activities/legacy-types.ts says why).
  const log = config.log ?? pino(loggerOptions('worker'));
  legacyCheck = checkLegacyTypes(
    { s3, bucket: config.bucket, meta, duckdb, workDir: config.workDir },
    {
      repair: true,
      signal: legacy.signal,
    },
  ).then(
    (findings) => {
      for (const f of findings)
        (f.outcome === 'repaired' ? log.info : log.warn).call(log, { table: f.table, outcome: f.outcome }, f.message);
    },
    (error: Error) => {
      if (!legacy.signal.aborted) log.warn({ err: error }, `checking tables for legacy types failed: ${error.message}`);
    },
  );
  const all = [workers.merge, workers.pool].filter((w): w is Worker => w !== undefined);
  const shutdown = () => {
    for (const worker of all) if (worker.getState() === 'RUNNING') worker.shutdown();
  };
  return {
    workers,
    shutdown,
    run: async () => {
      try {
        // One worker failing takes the other down with it: a worker process is all or nothing.
        await Promise.all(
          all.map((worker) => worker.run().catch((error: unknown) => (shutdown(), Promise.reject(error)))),
        );
      } finally {
        await closeAll();
      }
    },
  };
}

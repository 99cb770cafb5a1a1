/**
 * The composition root of a Berth worker: builds the real clients, the activities around them, and
 * a Temporal worker on the shared task queue.
 */
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import { createHeavyPoolActivities, createJanitorActivities, createMergeActivities, createPreflightActivities, createServingScalerActivities } from '../activities/index.js';
import type { ComputePlatform } from '../activities/platform/compute-platform.js';
import { openSandboxedDuckDB } from '../services/common/duckdb.js';
import { createS3Client, type S3Config } from '../services/common/s3-client.js';
import { MetaClient } from '../services/meta/client.js';
import { TASK_QUEUE } from '../workflows/api.js';

export interface BerthWorkerConfig {
  temporalAddress: string;
  /** @default 'default' */
  namespace?: string;
  /** @default 'berth' */
  taskQueue?: string;
  /** The workflow code: a path to workflows/index, or a prebuilt bundle. */
  workflows: Pick<WorkerOptions, 'workflowsPath' | 'workflowBundle'>;
  metaUrl: string;
  token: string;
  s3: S3Config;
  bucket: string;
  /** Scratch space for merges (emptied at start). */
  workDir: string;
  /** The group whose owners receive merged segments. @default 'serving' */
  servingGroup?: string;
  /** The heavy pool's platform driver; no heavy pool without it. */
  heavyPool?: { platform: ComputePlatform };
  /** The platform driver that scales the serving group (opt-in); no serving autoscaler without it. */
  servingScaler?: { platform: ComputePlatform };
}

export interface BerthWorker {
  worker: Worker;
  /** Runs until shutdown, then closes every client. */
  run(): Promise<void>;
}

export async function createBerthWorker(config: BerthWorkerConfig): Promise<BerthWorker> {
  await rm(config.workDir, { recursive: true, force: true });
  await mkdir(path.join(config.workDir, 'spill'), { recursive: true });
  const s3 = createS3Client(config.s3);
  const meta = new MetaClient(config.metaUrl, config.token);
  const duckdb = await openSandboxedDuckDB({ allowedDirectories: [config.workDir], tempDirectory: path.join(config.workDir, 'spill') });
  const storage = { s3, bucket: config.bucket, duckdb, workDir: config.workDir };
  const connection = await NativeConnection.connect({ address: config.temporalAddress });
  const worker = await Worker.create({
    connection,
    namespace: config.namespace ?? 'default',
    taskQueue: config.taskQueue ?? TASK_QUEUE,
    ...config.workflows,
    activities: {
      ...createMergeActivities({ s3, bucket: config.bucket, meta, token: config.token, duckdb, workDir: config.workDir, group: config.servingGroup }),
      ...createJanitorActivities({ s3, bucket: config.bucket, meta }),
      ...(config.heavyPool
        ? {
            ...createHeavyPoolActivities({ platform: config.heavyPool.platform, meta, token: config.token, storage }),
            ...createPreflightActivities({ platform: config.heavyPool.platform, meta, storage }),
          }
        : {}),
      ...(config.servingScaler ? createServingScalerActivities({ platform: config.servingScaler.platform, meta }) : {}),
    },
  });
  return {
    worker,
    run: async () => {
      try {
        await worker.run();
      } finally {
        await connection.close();
        duckdb.closeSync();
        s3.destroy();
      }
    },
  };
}

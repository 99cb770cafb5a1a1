/** A Berth worker for tests: real activities against a test cluster, on a task queue of its own. */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { Client, Connection } from '@temporalio/client';
import { inject } from 'vitest';
import { WORKFLOW_INTERCEPTOR_MODULES } from '../../workers/tracing.js';
import { createBerthWorker, type BerthWorker, type BerthWorkerConfig } from '../../workers/worker.js';
import { serviceEnv, TOKEN, type TestCluster } from './cluster.js';
import { spawnOwned } from './process-groups.js';

export const WORKFLOWS_PATH = fileURLToPath(new URL('../../workflows/index.ts', import.meta.url));

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;
/** The workflow bundle as production builds it (tracing interceptors included), built once per test file. */
export const workflowBundle = () =>
  (bundle ??= bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: WORKFLOW_INTERCEPTOR_MODULES,
    logger: { info() {}, warn() {}, error() {}, debug() {}, trace() {}, log() {} },
  }));

export interface RunningWorker {
  worker: BerthWorker;
  done: Promise<void>;
  stop(): Promise<void>;
}

/**
 * A worker in this process, on the run's Temporal dev server unless `extra.temporalAddress` names
 * another. `taskQueue` is its base queue: pool control polls it, merges `mergeTaskQueueFor(it)`.
 */
export async function startWorker(
  cluster: TestCluster,
  taskQueue: string,
  extra: Partial<
    Pick<
      BerthWorkerConfig,
      'heavyPool' | 'servingScaler' | 'temporalAddress' | 'mergeConcurrency' | 'shutdownGraceMs' | 'log'
    >
  > = {},
): Promise<RunningWorker> {
  const worker = await createBerthWorker({
    temporalAddress: inject('temporalAddress'),
    taskQueue,
    workflows: { workflowBundle: await workflowBundle() },
    metaUrl: cluster.metaUrl,
    token: TOKEN,
    s3: cluster.s3,
    bucket: cluster.bucket,
    workDir: `${cluster.dir}/worker-${randomUUID()}`,
    ...extra,
  });
  const done = worker.run();
  return {
    worker,
    done,
    stop: async () => {
      worker.shutdown();
      await done;
    },
  };
}

export async function temporalClient(address = inject('temporalAddress')): Promise<Client> {
  return new Client({ connection: await Connection.connect({ address }) });
}

/**
 * Starts the built worker (`dist/workers/main.js`) as a process of its own, against a test
 * cluster, so that a test can kill it for real. Schedules are off; `env` adds or overrides.
 */
export function spawnWorkerProcess(
  cluster: TestCluster,
  taskQueue: string,
  env: Record<string, string> = {},
): { child: ChildProcess; exited: Promise<unknown>; stderr(): string } {
  const child = spawnOwned(process.execPath, [fileURLToPath(new URL('../../dist/workers/main.js', import.meta.url))], {
    env: {
      ...process.env,
      BERTH_TEMPORAL_ADDRESS: inject('temporalAddress'),
      BERTH_TASK_QUEUE: taskQueue,
      ...serviceEnv(cluster),
      BERTH_WORKER_DIR: `${cluster.dir}/worker-process-${randomUUID()}`,
      BERTH_SCHEDULE_SYNC_MS: '0',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-8_000)));
  return { child, exited: new Promise((resolve) => child.once('exit', resolve)), stderr: () => stderr };
}

/** A Berth worker for tests: real activities against a test cluster, on a task queue of its own. */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { Client, Connection } from '@temporalio/client';
import { inject } from 'vitest';
import { createBerthWorker, type BerthWorker, type BerthWorkerConfig } from '../../workers/worker.js';
import { TOKEN, type TestCluster } from './cluster.js';

export const WORKFLOWS_PATH = fileURLToPath(new URL('../../workflows/index.ts', import.meta.url));

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;
/** The workflow bundle, built once per test file. */
export const workflowBundle = () => (bundle ??= bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: { info() {}, warn() {}, error() {}, debug() {}, trace() {}, log() {} } }));

export interface RunningWorker {
  worker: BerthWorker;
  done: Promise<void>;
  stop(): Promise<void>;
}

export async function startWorker(cluster: TestCluster, taskQueue: string, extra: Pick<BerthWorkerConfig, 'heavyPool'> = {}): Promise<RunningWorker> {
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
      worker.worker.shutdown();
      await done;
    },
  };
}

export async function temporalClient(): Promise<Client> {
  return new Client({ connection: await Connection.connect({ address: inject('temporalAddress') }) });
}

/**
 * Runs a Berth worker. Configuration comes from the environment (see docs/configuration.md); the workflow code is
 * the bundle `npm run build` wrote. It also keeps the Temporal Schedules in line with the
 * configuration: the janitor's, a merge schedule for every table meta knows (updated when the
 * configuration changes), none for a table meta no longer lists. SIGTERM or SIGINT stops it
 * gracefully: in-flight steps get BERTH_WORKER_SHUTDOWN_GRACE_MS to finish, then are cancelled.
 * The Temporal SDK's metrics are served for Prometheus at BERTH_WORKER_METRICS_ADDRESS.
 */
import { stopTracing } from '../services/common/telemetry.js'; // first: it instruments node:http before anything loads it
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { atBoot, loadConfig, memoryGroupOf, servingScalerConfigOf } from '../services/common/config.js';
import { startService } from '../services/common/startup.js';
import { s3ConfigFromEnv } from '../services/common/s3-client.js';
import { MetaClient } from '../services/meta/client.js';
import { WorkerConfig } from './config.js';
import { ensureReconcilerSchedule } from './reconciler-schedule.js';
import { syncSchedules, type ScheduleConfig } from './schedules.js';
import { mergeTaskQueueFor } from '../workflows/contracts/shared.js';
import { startTableDrop } from '../workflows/table-drop-client.js';
import { startRowDelete } from '../workflows/row-delete-client.js';
import { heavyPoolPlatform } from './platform-from-env.js';
import { createBerthWorker } from './worker.js';
import { prebuiltWorkflowBundle } from './workflow-bundle.js';
import { installWorkerRuntime } from './runtime.js';

// A stop asked for while the worker starts is kept and honoured once it runs: the Temporal
// runtime's own signal handler would otherwise swallow it, and the worker would run on.
let stopRequested = false;
let stop = () => {
  stopRequested = true;
};
process.once('SIGINT', () => stop());
process.once('SIGTERM', () => stop());

const config = loadConfig(WorkerConfig);
const memoryGroup = atBoot(() => memoryGroupOf(config));
const log = installWorkerRuntime({ metricsAddress: config.BERTH_WORKER_METRICS_ADDRESS });
const {
  BERTH_TEMPORAL_ADDRESS: temporalAddress,
  BERTH_TEMPORAL_NAMESPACE: namespace,
  BERTH_META_URL: metaUrl,
  BERTH_TASK_QUEUE: taskQueue,
} = config;
const { token } = startService(config);
const schedules: ScheduleConfig = {
  mergeEveryMs: config.BERTH_MERGE_EVERY_MS,
  mergeMinInputs: config.BERTH_MERGE_MIN_INPUTS,
  mergeMaxInputs: config.BERTH_MERGE_MAX_INPUTS,
  janitorEveryMs: config.BERTH_JANITOR_EVERY_MS,
  retentionEveryMs: config.BERTH_RETENTION_EVERY_MS,
  janitorGraceMs: config.BERTH_JANITOR_GRACE_MS,
  catchupWindowMs: config.BERTH_SCHEDULE_CATCHUP_MS,
  taskQueue: mergeTaskQueueFor(taskQueue),
};

const heavyPool = await heavyPoolPlatform(config);
const berthWorker = await createBerthWorker({
  temporalAddress,
  namespace,
  taskQueue,
  workflows: { workflowBundle: await prebuiltWorkflowBundle(config.BERTH_WORKFLOW_BUNDLE) },
  metaUrl,
  token,
  s3: s3ConfigFromEnv(config),
  bucket: config.BERTH_S3_BUCKET,
  workDir: config.BERTH_WORKER_DIR ?? path.join(config.BERTH_DATA_DIR, 'worker'),
  servingGroup: config.BERTH_SERVING_GROUP,
  heavyPool: heavyPool && config.BERTH_HEAVY_GROUP ? { platform: heavyPool.platform } : undefined,
  servingScaler: heavyPool && servingScalerConfigOf(config) ? { platform: heavyPool.platform } : undefined,
  mergeConcurrency: config.BERTH_MERGE_CONCURRENCY,
  shutdownGraceMs: config.BERTH_WORKER_SHUTDOWN_GRACE_MS,
  log,
});

// New tables, changed settings and dropped tables reach the schedules within one sync interval.
const client = new Client({ connection: await Connection.connect({ address: temporalAddress }), namespace });
const meta = new MetaClient(metaUrl, token);
const heavyGroup = config.BERTH_HEAVY_GROUP;
const sync = async () => {
  // The reconciler runs on the pool's queue, next to the pool it reconciles.
  if (heavyGroup)
    await ensureReconcilerSchedule(client, {
      groups: [heavyGroup, ...(memoryGroup ? [memoryGroup] : [])],
      everyMs: config.BERTH_HEAVY_RECONCILE_MS,
      taskQueue,
    });
  const { created, updated, deleted } = await syncSchedules(
    client,
    (await meta.listTables()).map((t) => t.name),
    schedules,
  );
  for (const [what, ids] of Object.entries({ created, updated, deleted }))
    if (ids.length > 0) console.error(`schedules ${what}: ${ids.join(', ')}`);
  // A drop whose workflow never started (dropped over HTTP) or left a segment behind (a commit
  // that raced the drop) is finished here: its workflow id is per drop, so a running one is found.
  for (const drop of await meta.drops()) {
    const run = await startTableDrop(client, drop, mergeTaskQueueFor(taskQueue));
    console.error(`table drop of ${drop.table}: workflow ${run.workflowId}`);
  }
  // Likewise a delete by predicate recorded over HTTP, or one whose run ended before it finished.
  for (const task of await meta.pendingDeletes()) {
    const run = await startRowDelete(client, task, mergeTaskQueueFor(taskQueue));
    console.error(`delete ${task.id} of ${task.table}: workflow ${run.workflowId}`);
  }
};
const syncEveryMs = config.BERTH_SCHEDULE_SYNC_MS; // 0 turns the schedules off
const reportSyncFailure = (error: Error) => console.error(`schedule sync failed: ${error.message}`);
if (syncEveryMs > 0) await sync().catch(reportSyncFailure);
const timer = syncEveryMs > 0 ? setInterval(() => void sync().catch(reportSyncFailure), syncEveryMs) : undefined;

process.stdout.write(`${JSON.stringify({ service: 'worker', url: `temporal://${temporalAddress}/${namespace}` })}\n`);
stop = () => {
  clearInterval(timer);
  berthWorker.shutdown();
};
const running = berthWorker.run(); // the workers are running once run() is called
if (stopRequested) stop();
await running;
await heavyPool?.close();
await client.connection.close();
await stopTracing();

/**
 * Runs a Berth worker. Configuration comes from the environment (see README). It also keeps the
 * Temporal Schedules in place: the janitor's, and a merge schedule for every table meta knows.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { envNumber, envString } from '../services/common/env.js';
import { startService } from '../services/common/startup.js';
import { s3ConfigFromEnv } from '../services/common/s3-client.js';
import { servingScalerConfigFromEnv } from '../services/common/serving-scaler-config.js';
import { MetaClient } from '../services/meta/client.js';
import { ensureReconcilerSchedule } from './reconciler-schedule.js';
import { ensureJanitorSchedule, ensureMergeSchedule, type ScheduleConfig } from './schedules.js';
import { TASK_QUEUE } from '../workflows/api.js';
import { heavyPoolFromEnv } from './platform-from-env.js';
import { createBerthWorker } from './worker.js';

const temporalAddress = envString('BERTH_TEMPORAL_ADDRESS', '127.0.0.1:7233');
const namespace = envString('BERTH_TEMPORAL_NAMESPACE', 'default');
const metaUrl = envString('BERTH_META_URL');
const { token } = startService();
const taskQueue = envString('BERTH_TASK_QUEUE', TASK_QUEUE);
const schedules: ScheduleConfig = {
  mergeEveryMs: envNumber('BERTH_MERGE_EVERY_MS', 300_000),
  mergeMinInputs: envNumber('BERTH_MERGE_MIN_INPUTS', 10),
  mergeMaxInputs: envNumber('BERTH_MERGE_MAX_INPUTS', 100),
  janitorEveryMs: envNumber('BERTH_JANITOR_EVERY_MS', 900_000),
  janitorGraceMs: envNumber('BERTH_JANITOR_GRACE_MS', 3_600_000),
  taskQueue,
};

const heavyPool = await heavyPoolFromEnv();
const berthWorker = await createBerthWorker({
  temporalAddress,
  namespace,
  taskQueue,
  workflows: { workflowsPath: fileURLToPath(new URL('../workflows/index.js', import.meta.url)) },
  metaUrl,
  token,
  s3: s3ConfigFromEnv(),
  bucket: envString('BERTH_S3_BUCKET', 'berth'),
  workDir: envString('BERTH_WORKER_DIR', path.join(envString('BERTH_DATA_DIR', '.berth'), 'worker')),
  heavyPool: heavyPool && process.env.BERTH_HEAVY_GROUP ? { platform: heavyPool.platform } : undefined,
  servingScaler: heavyPool && servingScalerConfigFromEnv() ? { platform: heavyPool.platform } : undefined,
});

// New tables get their merge schedule within one sync interval.
const client = new Client({ connection: await Connection.connect({ address: temporalAddress }), namespace });
const meta = new MetaClient(metaUrl, token);
const heavyGroup = process.env.BERTH_HEAVY_GROUP;
const syncSchedules = async () => {
  await ensureJanitorSchedule(client, schedules);
  if (heavyGroup) await ensureReconcilerSchedule(client, { groups: [heavyGroup], everyMs: envNumber('BERTH_HEAVY_RECONCILE_MS', 60_000), taskQueue });
  for (const table of await meta.listTables()) await ensureMergeSchedule(client, table.name, schedules);
};
const syncEveryMs = envNumber('BERTH_SCHEDULE_SYNC_MS', 30_000); // 0 turns the schedules off
const reportSyncFailure = (error: Error) => console.error(`schedule sync failed: ${error.message}`);
if (syncEveryMs > 0) await syncSchedules().catch(reportSyncFailure);
const timer = syncEveryMs > 0 ? setInterval(() => void syncSchedules().catch(reportSyncFailure), syncEveryMs) : undefined;

process.stdout.write(`${JSON.stringify({ service: 'worker', url: `temporal://${temporalAddress}/${namespace}` })}\n`);
const stop = () => {
  clearInterval(timer);
  berthWorker.worker.shutdown();
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
await berthWorker.run();
await heavyPool?.close();
await client.connection.close();

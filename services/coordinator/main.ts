/** Runs the coordinator. Configuration comes from the environment (see README). */
import { stopTracing } from '../common/telemetry.js'; // first: it instruments node:http before anything loads it
import path from 'node:path';
import { DEFAULT_VERDICT_THRESHOLDS } from '../../core/routing-verdict.js';
import { startService } from '../common/startup.js';
import { envNumber, envString } from '../common/env.js';
import { TASK_QUEUE } from '../../workflows/api.js';
import { poolConfigFromEnv } from '../common/pool-config.js';
import { servingScalerConfigFromEnv } from '../common/serving-scaler-config.js';
import { s3ConfigFromEnv } from '../common/s3-client.js';
import { startCoordinator } from './coordinator.js';

const { token } = startService();

const heavyPool = poolConfigFromEnv();
const servingScaler = servingScalerConfigFromEnv();
const coordinator = await startCoordinator({
  workDir: envString('BERTH_COORDINATOR_DIR', path.join(envString('BERTH_DATA_DIR', '.berth'), 'coordinator')),
  metaUrl: envString('BERTH_META_URL'),
  token,
  s3: s3ConfigFromEnv(),
  bucket: envString('BERTH_S3_BUCKET', 'berth'),
  group: envString('BERTH_SERVING_GROUP', 'serving'),
  seedNodes: (process.env.BERTH_SEED_NODES ?? '').split(',').filter(Boolean),
  memberPollMs: envNumber('BERTH_MEMBER_POLL_MS', 10_000),
  maxConcurrency: envNumber('BERTH_MAX_CONCURRENT_QUERIES', 16),
  maxQueueSize: envNumber('BERTH_MAX_QUEUED_QUERIES', 16),
  queueTimeoutMs: envNumber('BERTH_QUEUE_TIMEOUT_MS', 10_000),
  planCacheSize: envNumber('BERTH_PLAN_CACHE_SIZE', 1000),
  queryLogSize: envNumber('BERTH_QUERY_LOG_SIZE', 10_000),
  verdictThresholds: {
    scanBytes: envNumber('BERTH_HEAVY_SCAN_BYTES', DEFAULT_VERDICT_THRESHOLDS.scanBytes),
    memoryBytes: envNumber('BERTH_HEAVY_MEMORY_BYTES', DEFAULT_VERDICT_THRESHOLDS.memoryBytes),
  },
  heavyPool: heavyPool && {
    config: heavyPool,
    temporalAddress: envString('BERTH_TEMPORAL_ADDRESS', '127.0.0.1:7233'),
    namespace: envString('BERTH_TEMPORAL_NAMESPACE', 'default'),
    taskQueue: envString('BERTH_TASK_QUEUE', TASK_QUEUE),
    queueTimeoutMs: envNumber('BERTH_HEAVY_QUEUE_TIMEOUT_MS', 1_200_000),
    admissionPollMs: envNumber('BERTH_HEAVY_ADMISSION_POLL_MS', 250),
  },
  scanTimeoutMs: envNumber('BERTH_SCAN_TIMEOUT_MS', 120_000),
  queryDeadlineMs: envNumber('BERTH_QUERY_DEADLINE_MS', 300_000),
  maxResultBytes: envNumber('BERTH_MAX_RESULT_BYTES', 256 * 1024 ** 2),
  memoryLimit: process.env.BERTH_DUCKDB_MEMORY_LIMIT || undefined,
  maxIngestDepth: envNumber('BERTH_INGEST_MAX_DEPTH', 64),
  servingScaler: servingScaler && {
    config: servingScaler,
    temporalAddress: envString('BERTH_TEMPORAL_ADDRESS', '127.0.0.1:7233'),
    namespace: envString('BERTH_TEMPORAL_NAMESPACE', 'default'),
    taskQueue: envString('BERTH_TASK_QUEUE', TASK_QUEUE),
  },
  host: envString('BERTH_COORDINATOR_HOST', '127.0.0.1'),
  port: envNumber('BERTH_COORDINATOR_PORT', 7401),
});
process.stdout.write(`${JSON.stringify({ service: 'coordinator', url: coordinator.url })}\n`);
const stop = async () => {
  await coordinator.close();
  await stopTracing();
  process.exit(0);
};
process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());

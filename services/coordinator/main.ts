/** Runs the coordinator. Configuration comes from the environment (see config.ts and docs/configuration.md). */
import '../common/telemetry.js'; // first: it instruments node:http before anything loads it
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { atBoot, ConfigError, heavyPoolsOf, loadConfig, servingScalerConfigOf } from '../common/config.js';
import { startService } from '../common/startup.js';
import { s3ConfigFromEnv } from '../common/s3-client.js';
import { announce, closeOnSignals } from '../common/serve.js';
import { CoordinatorConfig } from './config.js';
import { startCoordinator } from './coordinator.js';

const config = loadConfig(CoordinatorConfig);

/** The PostgreSQL front's certificate and key, read at boot; both or neither. */
function postgresTls(certFile?: string, keyFile?: string): { cert: string; key: string } | undefined {
  if (!certFile && !keyFile) return undefined;
  if (!certFile || !keyFile)
    throw new ConfigError('BERTH_PG_TLS_CERT and BERTH_PG_TLS_KEY go together: set both or neither');
  try {
    return { cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') };
  } catch (error) {
    throw new ConfigError(`BERTH_PG_TLS_CERT or BERTH_PG_TLS_KEY cannot be read: ${(error as Error).message}`);
  }
}
const { token } = startService(config);

const heavyPools = atBoot(() => heavyPoolsOf(config));
const servingScaler = servingScalerConfigOf(config);
const temporal = {
  temporalAddress: config.BERTH_TEMPORAL_ADDRESS,
  namespace: config.BERTH_TEMPORAL_NAMESPACE,
  taskQueue: config.BERTH_TASK_QUEUE,
};
const coordinator = await startCoordinator({
  workDir: config.BERTH_COORDINATOR_DIR ?? path.join(config.BERTH_DATA_DIR, 'coordinator'),
  metaUrl: config.BERTH_META_URL,
  token,
  s3: s3ConfigFromEnv(config),
  bucket: config.BERTH_S3_BUCKET,
  group: config.BERTH_SERVING_GROUP,
  seedNodes: (config.BERTH_SEED_NODES ?? '').split(',').filter(Boolean),
  memberPollMs: config.BERTH_MEMBER_POLL_MS,
  maxConcurrency: config.BERTH_MAX_CONCURRENT_QUERIES,
  maxQueueSize: config.BERTH_MAX_QUEUED_QUERIES,
  queueTimeoutMs: config.BERTH_QUEUE_TIMEOUT_MS,
  planCacheSize: config.BERTH_PLAN_CACHE_SIZE,
  resultCacheBytes: config.BERTH_RESULT_CACHE_BYTES,
  broadcastLimits: { bytes: config.BERTH_BROADCAST_MAX_BYTES, rows: config.BERTH_BROADCAST_MAX_ROWS },
  exchangeMemoryBytes: config.BERTH_EXCHANGE_MEMORY_BYTES,
  queryLogSize: config.BERTH_QUERY_LOG_SIZE,
  verdictThresholds: { scanBytes: config.BERTH_HEAVY_SCAN_BYTES, memoryBytes: config.BERTH_HEAVY_MEMORY_BYTES },
  heavyPool: heavyPools.scan && {
    config: heavyPools.scan,
    memory: heavyPools.memory,
    ...temporal,
    queueTimeoutMs: config.BERTH_HEAVY_QUEUE_TIMEOUT_MS,
    admissionPollMs: config.BERTH_HEAVY_ADMISSION_POLL_MS,
  },
  scanTimeoutMs: config.BERTH_SCAN_TIMEOUT_MS,
  queryDeadlineMs: config.BERTH_QUERY_DEADLINE_MS,
  maxResultBytes: config.BERTH_MAX_RESULT_BYTES,
  memoryLimit: config.BERTH_DUCKDB_MEMORY_LIMIT,
  threads: config.BERTH_DUCKDB_THREADS,
  maxIngestDepth: config.BERTH_INGEST_MAX_DEPTH,
  maxIngestBytes: config.BERTH_INGEST_MAX_BYTES,
  maxShipperBytes: config.BERTH_SHIPPER_MAX_BYTES,
  pushTimeoutMs: config.BERTH_PUSH_TIMEOUT_MS,
  servingScaler: servingScaler && { config: servingScaler, ...temporal },
  console: { controllerUrl: config.BERTH_CONTROLLER_URL, temporalUi: config.BERTH_TEMPORAL_UI_URL },
  host: config.BERTH_COORDINATOR_HOST,
  port: config.BERTH_COORDINATOR_PORT,
  postgres: {
    port: config.BERTH_PG_PORT,
    maxConnections: config.BERTH_PG_MAX_CONNECTIONS,
    maxConnectionsPerClient: config.BERTH_PG_MAX_CONNECTIONS_PER_CLIENT,
    idleTimeoutMs: config.BERTH_PG_IDLE_TIMEOUT_MS,
    tls: atBoot(() => postgresTls(config.BERTH_PG_TLS_CERT, config.BERTH_PG_TLS_KEY)),
  },
});
announce({ service: 'coordinator', url: coordinator.url, postgres: coordinator.postgresUrl! });
closeOnSignals(() => coordinator.close());

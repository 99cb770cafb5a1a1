/** Runs one query node. Configuration comes from the environment (see config.ts and docs/configuration.md). */
import '../common/telemetry.js'; // first: it instruments node:http before anything loads it
import path from 'node:path';
import { loadConfig } from '../common/config.js';
import { lowerCpuPriority, startService } from '../common/startup.js';
import { s3ConfigFromEnv } from '../common/s3-client.js';
import { announce, closeOnSignals } from '../common/serve.js';
import { QueryNodeConfig } from './config.js';
import { startQueryNode } from './node.js';

const config = loadConfig(QueryNodeConfig);
const { token } = startService(config);
lowerCpuPriority(config.BERTH_NODE_NICENESS); // before DuckDB makes its threads

const node = await startQueryNode({
  cacheDir: config.BERTH_NODE_CACHE_DIR ?? path.join(config.BERTH_DATA_DIR, 'node'),
  cacheBytes: config.BERTH_NODE_CACHE_BYTES,
  memoryBytes: config.BERTH_NODE_MEMORY_BYTES,
  group: config.BERTH_NODE_GROUP,
  host: config.BERTH_NODE_HOST,
  port: config.BERTH_NODE_PORT,
  // In a container: the URL peers use (Kubernetes: built from the pod IP in BERTH_NODE_ADVERTISE_HOST).
  advertiseUrl:
    config.BERTH_NODE_ADVERTISE_URL ??
    (config.BERTH_NODE_ADVERTISE_HOST
      ? `http://${config.BERTH_NODE_ADVERTISE_HOST}:${config.BERTH_NODE_PORT}`
      : undefined),
  metaUrl: config.BERTH_META_URL,
  token,
  s3: s3ConfigFromEnv(config),
  bucket: config.BERTH_S3_BUCKET,
  vcpus: config.BERTH_NODE_VCPUS,
  heartbeatMs: config.BERTH_HEARTBEAT_MS,
  memberPollMs: config.BERTH_MEMBER_POLL_MS,
  warmIntervalMs: config.BERTH_WARM_INTERVAL_MS,
  threads: config.BERTH_DUCKDB_THREADS,
  memoryLimit: config.BERTH_DUCKDB_MEMORY_LIMIT,
  finalStage: {
    memoryLimit: config.BERTH_FINAL_STAGE_MEMORY_LIMIT ?? config.BERTH_DUCKDB_MEMORY_LIMIT,
    tempDirectoryLimit: config.BERTH_FINAL_STAGE_TEMP_LIMIT,
  },
});
announce({ service: 'query-node', id: node.id, url: node.url });
closeOnSignals(() => node.close());

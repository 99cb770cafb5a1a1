/** Runs one query node. Configuration comes from the environment (see README). */
import path from 'node:path';
import { startService } from '../common/startup.js';
import { envNumber, envOptionalNumber, envString } from '../common/env.js';
import { s3ConfigFromEnv } from '../common/s3-client.js';
import { startQueryNode } from './node.js';

const { token } = startService();

const node = await startQueryNode({
  cacheDir: envString('BERTH_NODE_CACHE_DIR', path.join(envString('BERTH_DATA_DIR', '.berth'), 'node')),
  cacheBytes: envNumber('BERTH_NODE_CACHE_BYTES', 1024 ** 3),
  group: envString('BERTH_NODE_GROUP', 'serving'),
  host: envString('BERTH_NODE_HOST', '127.0.0.1'),
  port: envNumber('BERTH_NODE_PORT', 0),
  // In a container: the URL peers use (Kubernetes: built from the pod IP in BERTH_NODE_ADVERTISE_HOST).
  advertiseUrl:
    process.env.BERTH_NODE_ADVERTISE_URL ||
    (process.env.BERTH_NODE_ADVERTISE_HOST ? `http://${process.env.BERTH_NODE_ADVERTISE_HOST}:${envNumber('BERTH_NODE_PORT', 0)}` : undefined),
  metaUrl: envString('BERTH_META_URL'),
  token,
  s3: s3ConfigFromEnv(),
  bucket: envString('BERTH_S3_BUCKET', 'berth'),
  vcpus: envOptionalNumber('BERTH_NODE_VCPUS'),
  heartbeatMs: envNumber('BERTH_HEARTBEAT_MS', 5_000),
  memberPollMs: envNumber('BERTH_MEMBER_POLL_MS', 10_000),
  warmIntervalMs: envNumber('BERTH_WARM_INTERVAL_MS', 10_000),
  threads: envOptionalNumber('BERTH_DUCKDB_THREADS'),
  memoryLimit: process.env.BERTH_DUCKDB_MEMORY_LIMIT || undefined,
});
process.stdout.write(`${JSON.stringify({ service: 'query-node', id: node.id, url: node.url })}\n`);
const stop = async () => {
  await node.close();
  process.exit(0);
};
process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());

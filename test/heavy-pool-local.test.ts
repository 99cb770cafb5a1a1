/**
 * 0 → N → 0 end to end: a heavy query on a parked pool launches it through Temporal, the local
 * driver starts real query-node processes after a boot delay, every readiness layer passes, the
 * query runs on the pool with the right answer, and the idle reaper parks the pool again.
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LocalPlatform } from '../activities/platform/local-platform.js';
import { startServiceProcess, type ServiceProcess } from '../cli/embedded/service-process.js';
import { launchPool, poolStatus } from '../services/controller/pool-client.js';
import { poolWorkflowId } from '../workflows/api.js';
import { FAST, startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';

const QUERY_NODE = fileURLToPath(new URL('../dist/services/query-node/main.js', import.meta.url));
const HEAVY_SQL = 'SELECT service, count(DISTINCT user_id) AS users, count(*) AS n FROM events GROUP BY service ORDER BY service';

describe('the heavy pool from zero and back', () => {
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  let platform: LocalPlatform;
  /** Every backend process the driver started, by URL, so a test can kill one. */
  const backends = new Map<string, ServiceProcess>();
  const taskQueue = `pool-local-${randomUUID()}`;
  const group = `heavy-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    cluster = await startCluster({
      vcpus: [2, 2],
      coordinator: {
        heavyPool: { temporalAddress: inject('temporalAddress'), taskQueue, config: { group, increment: 2, maxReplicas: 2, idleTimeoutMs: 3_000, readinessPollMs: 200, monitorPollMs: 500 } },
        verdictThresholds: { scanBytes: 1e12, memoryBytes: 1 }, // every gathered shape is heavy here
      },
    });
    await cluster.ingestEvents('events', 4, 500);
    platform = new LocalPlatform({
      bootDelayMs: 300,
      startBackend: async (g, i) => {
        const backend = await startServiceProcess(`${g}-${i}`, QUERY_NODE, {
          BERTH_TOKEN: TOKEN,
          BERTH_META_URL: cluster.metaUrl,
          BERTH_NODE_GROUP: g,
          BERTH_NODE_VCPUS: '2',
          BERTH_DUCKDB_THREADS: '1',
          BERTH_NODE_CACHE_DIR: `${cluster.dir}/${g}-${i}`,
          BERTH_HEARTBEAT_MS: String(FAST.heartbeatMs),
          BERTH_MEMBER_POLL_MS: String(FAST.memberPollMs),
          BERTH_S3_ENDPOINT: cluster.s3.endpoint,
          // A "liar" backend heartbeats like any other but cannot read storage: its key is refused.
          BERTH_S3_ACCESS_KEY_ID: g.startsWith('liar') ? 'NOT-A-KEY' : cluster.s3.credentials.accessKeyId,
          BERTH_S3_SECRET_ACCESS_KEY: cluster.s3.credentials.secretAccessKey,
          BERTH_S3_BUCKET: cluster.bucket,
          BERTH_LOG_LEVEL: 'warn',
        }, `${cluster.dir}/${g}-${i}.log`);
        backends.set(backend.url, backend);
        return backend;
      },
    });
    client = await temporalClient();
    worker = await startWorker(cluster, taskQueue, { heavyPool: { platform, coordinatorUrl: cluster.coordinator.url } });
  });
  afterAll(async () => {
    await client?.workflow.getHandle(poolWorkflowId(group)).terminate('test over').catch(() => {});
    await worker?.stop();
    await platform?.close();
    await client?.connection.close();
    await cluster?.close();
  });

  it('launches a parked pool for a heavy query, passes every readiness layer, answers right, then parks', { timeout: 180_000 }, async () => {
    expect((await poolStatus({ client, group })).phase).toBe('parked');
    const light = await cluster.coordinator.queries.queryOnGroup(HEAVY_SQL, 'serving');

    const { status: code, body: heavy } = await cluster.query(HEAVY_SQL);
    expect(code).toBe(200);
    expect(heavy.stats.verdict).toMatchObject({ class: 'heavy', bottleneck: 'memory' });
    expect(heavy.stats.group).toBe(group);
    expect(heavy.stats.pool?.workflowId).toBe(poolWorkflowId(group));
    expect(heavy.rows).toEqual(light.rows);
    expect(Object.keys(heavy.stats.nodes)).toHaveLength(1);

    const up = await poolStatus({ client, group });
    expect(up).toMatchObject({ phase: 'ready', serveReady: true, target: 2, replicasPatched: 2, podsRunning: 2, aliveBackends: 2, patches: 1 });
    expect(up.layersPassed).toEqual(['pods', 'backends', 'canary']);

    // Idle for the timeout: drained, leases released, replicas to zero, parked, processes gone.
    await cluster.meta.acquireLease(`compaction:${group}`, group, 600_000);
    await expect.poll(async () => (await poolStatus({ client, group })).phase, { timeout: 20_000 }).toBe('parked');
    expect(await poolStatus({ client, group })).toMatchObject({ target: 0, replicasPatched: 0, patches: 2, serveReady: false });
    await expect.poll(() => platform.runningPods(group), { timeout: 10_000 }).toBe(0);
    expect((await cluster.meta.acquireLease(`compaction:${group}`, 'another-group', 1_000)).granted).toBe(true);
  });

  it('answers right when the backend running a heavy query is lost, by moving its work once', { timeout: 120_000 }, async () => {
    const first = await cluster.query(HEAVY_SQL); // launches the pool again
    expect(first.status).toBe(200);
    // The backend the query gathered on dies without a word: meta still lists it as alive.
    const [targetId] = Object.keys(first.body.stats.nodes);
    const target = (await cluster.meta.members(group)).find((m) => m.id === targetId)!;
    backends.get(target.url)!.child.kill('SIGKILL');
    await backends.get(target.url)!.exited;

    const second = await cluster.query(HEAVY_SQL);
    expect(second.status).toBe(200);
    expect(second.body.rows).toEqual(first.body.rows);
    expect(second.body.stats.fallbacks).toBe(1);
    expect(second.body.stats.nodes).not.toHaveProperty(target.id);
  });

  it('never serves on a backend that heartbeats but cannot read storage, and says why', { timeout: 120_000 }, async () => {
    const liar = `liar-${randomUUID().slice(0, 8)}`;
    const options = { client, taskQueue, config: { group: liar, increment: 1, maxReplicas: 1, readinessPollMs: 200 } };
    await launchPool(options, 1);
    await expect.poll(async () => (await poolStatus({ client, group: liar })).phase, { timeout: 60_000 }).toBe('canary');
    await expect.poll(async () => (await poolStatus({ client, group: liar })).notReady ?? '', { timeout: 30_000 }).toMatch(/the canary scan failed on qn-[0-9a-f]+ \(.+\)/);
    const status = await poolStatus({ client, group: liar });
    expect(status).toMatchObject({ serveReady: false, aliveBackends: 1, layersPassed: ['pods', 'backends'] });
    expect((await cluster.meta.backends(liar)).map((b) => b.alive)).toEqual([true]); // it does heartbeat
    await client.workflow.getHandle(poolWorkflowId(liar)).terminate('test over');
    await platform.setReplicas(liar, 0);
  });
});

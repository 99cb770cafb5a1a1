/**
 * The heavy pool end to end, on the local driver with real query-node processes: a heavy query on
 * a parked pool launches it through Temporal, every readiness layer passes, the coordinator runs
 * the admitted query on the pool's proven backends, and the idle reaper parks the pool again. Then
 * the pool at production shape: two coordinators sharing one queue, 1,000 queries at once, a 50 MB
 * answer, a launch on an empty bucket, and a terminated workflow whose capacity the reconciler
 * takes back. No workflow history ever holds a payload that grows with the data.
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { workflowMetadataQuery } from '@temporalio/workflow';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LocalPlatform } from '../activities/platform/local-platform.js';
import { startServiceProcess, type ServiceProcess } from '../activities/platform/service-process.js';
import { startCoordinator, type RunningCoordinator } from '../services/coordinator/coordinator.js';
import { launchPool, poolStatus } from '../workflows/pool-client.js';
import { poolWorkflowId, type PoolConfig } from '../workflows/contracts/heavy-pool.js';
import { ensureReconcilerSchedule } from '../workers/reconciler-schedule.js';
import { FAST, startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import { payloadsOver } from './helpers/history.js';
import { psql } from './helpers/pg-clients.js';

const QUERY_NODE = fileURLToPath(new URL('../dist/services/query-node/main.js', import.meta.url));
const HEAVY_SQL =
  'SELECT service, count(DISTINCT user_id) AS users, median(latency_ms) AS p50, count(*) AS n FROM events GROUP BY service ORDER BY service';
const SMALL_HEAVY_SQL = "SELECT median(latency_ms) AS p50 FROM events WHERE service = 'api'";
// A window (its final stage runs the query's own SQL, so it is heavy here) whose answer is about 50 MB of JSON.
const BIG_HEAVY_SQL =
  "SELECT ts, service, row_number() OVER (ORDER BY ts, service) AS n, repeat(service || level || coalesce(user_id, '?'), 2400) AS filler FROM events ORDER BY n";
// A window over 4 million rows (every pair of events): its sort holds more than 64 MiB.
const SPILLING_SQL =
  'SELECT max(k) AS k, count(*) AS n FROM (SELECT row_number() OVER (ORDER BY a.latency_ms, b.ts) AS k FROM events a, events b)';

/** A query over HTTP, as a client sends it. */
async function ask(
  coordinatorUrl: string,
  sql: string,
): Promise<{
  status: number;
  body: {
    rows?: unknown[][];
    types?: string[];
    columns?: string[];
    stats?: Record<string, unknown>;
    error?: string;
    message?: string;
  };
  retryAfter: string | null;
}> {
  const response = await fetch(`${coordinatorUrl}/v1/query`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ sql }),
  });
  return {
    status: response.status,
    body: (await response.json()) as never,
    retryAfter: response.headers.get('retry-after'),
  };
}

async function workload(coordinatorUrl: string, group: string): Promise<{ running: number; waiting: number }> {
  const { groups } = (await (await fetch(`${coordinatorUrl}/v1/workload-groups`)).json()) as {
    groups: { name: string; running: number; waiting: number }[];
  };
  return groups.find((g) => g.name === group)!;
}

/** The rows a process's final stages have received (berth_exchange_rows_total on its /metrics). */
async function exchangeRows(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^berth_exchange_rows_total (\d+)$/m.exec(text)?.[1] ?? 0);
}

describe('the heavy pool from zero and back', () => {
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  let platform: LocalPlatform;
  const extraCoordinators: RunningCoordinator[] = [];
  /** Every backend process the driver started, by URL, so a test can kill one. */
  const backends = new Map<string, ServiceProcess>();
  const taskQueue = `pool-local-${randomUUID()}`;
  const group = `heavy-${randomUUID().slice(0, 8)}`;
  const groups: string[] = [group];
  const poolConfig = (g: string, extra: Partial<PoolConfig> = {}): PoolConfig => ({
    group: g,
    increment: 2,
    maxReplicas: 2,
    idleTimeoutMs: 3_000,
    readinessConfirmMs: 100,
    ...extra,
  });
  const verdictThresholds = { scanBytes: 1e12, memoryBytes: 1 }; // every shape that runs its own SQL in the final stage is heavy here

  /** Another coordinator of the same cluster, with a pool of its own configuration. */
  const coordinatorFor = async (
    config: PoolConfig,
    extra: {
      queueTimeoutMs?: number;
      memory?: PoolConfig;
      thresholds?: typeof verdictThresholds;
      maxResultBytes?: number;
    } = {},
  ) => {
    const { thresholds = verdictThresholds, maxResultBytes, ...pool } = extra;
    const coordinator = await startCoordinator({
      workDir: path.join(cluster.dir, `coordinator-${randomUUID()}`),
      metaUrl: cluster.metaUrl,
      token: TOKEN,
      s3: cluster.s3,
      bucket: cluster.bucket,
      memberPollMs: FAST.memberPollMs,
      logger: false,
      verdictThresholds: thresholds,
      ...(maxResultBytes ? { maxResultBytes } : {}),
      heavyPool: { temporalAddress: inject('temporalAddress'), taskQueue, config, admissionPollMs: 100, ...pool },
    });
    extraCoordinators.push(coordinator);
    return coordinator;
  };

  beforeAll(async () => {
    cluster = await startCluster({
      vcpus: [2, 2],
      coordinator: {
        heavyPool: {
          temporalAddress: inject('temporalAddress'),
          taskQueue,
          config: poolConfig(group),
          admissionPollMs: 100,
        },
        verdictThresholds,
        postgres: { port: 0 },
      },
    });
    await cluster.ingestEvents('events', 4, 500);
    await cluster.ingest('signed', '{"ts":"2026-11-01 00:00:00","x":3}\n{"ts":"2026-11-01 00:00:00","x":-1}\n');
    platform = new LocalPlatform({
      bootDelayMs: 300,
      startBackend: async (g, i) => {
        const backend = await startServiceProcess(
          `${g}-${i}`,
          QUERY_NODE,
          {
            BERTH_TOKEN: TOKEN,
            // A "mute" backend runs but never reaches meta: it can never register.
            BERTH_META_URL: g.startsWith('mute') ? 'http://127.0.0.1:9' : cluster.metaUrl,
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
            // A "tight" backend's final stages have 64 MiB of memory; a "capped" one's also 1 MiB of temp directory.
            ...(/^(tight|capped)-/.test(g) ? { BERTH_FINAL_STAGE_MEMORY_LIMIT: '64MiB' } : {}),
            ...(g.startsWith('capped-') ? { BERTH_FINAL_STAGE_TEMP_LIMIT: '1MiB' } : {}),
          },
          `${cluster.dir}/${g}-${i}.log`,
        );
        backends.set(backend.url, backend);
        return backend;
      },
    });
    client = await temporalClient();
    worker = await startWorker(cluster, taskQueue, { heavyPool: { platform } });
  });
  afterAll(async () => {
    for (const g of groups)
      await client?.workflow
        .getHandle(poolWorkflowId(g))
        .terminate('test over')
        .catch(() => {});
    await Promise.all(extraCoordinators.map((c) => c.close()));
    await worker?.stop();
    await platform?.close();
    await client?.connection.close();
    await cluster?.close();
  });

  it(
    'launches a parked pool for a heavy query, passes every readiness layer, answers right, then parks',
    { timeout: 180_000 },
    async () => {
      expect((await poolStatus({ client, group })).phase).toBe('parked');
      const light = await cluster.coordinator.queries.queryOnGroup(HEAVY_SQL, 'serving');

      const coordinatorRowsBefore = await exchangeRows(cluster.coordinator.url);
      const { status: code, body: heavy } = await cluster.query(HEAVY_SQL);
      expect(code).toBe(200);
      // Its final stage ran on a heavy backend, which received every row the scans sent; the
      // coordinator's DuckDB received none.
      const finalBackend = (await cluster.meta.members(group)).find((m) => m.id === heavy.stats.stages.final);
      expect(finalBackend, `stages.final is ${heavy.stats.stages.final}`).toBeDefined();
      const sent = heavy.stats.stages.scan.reduce((sum: number, s: { rows: number }) => sum + s.rows, 0);
      expect(sent).toBeGreaterThan(0);
      expect(await exchangeRows(finalBackend!.url)).toBe(sent);
      expect(await exchangeRows(cluster.coordinator.url)).toBe(coordinatorRowsBefore);
      expect(heavy.stats.verdict).toMatchObject({ class: 'heavy', bottleneck: 'memory' });
      expect(heavy.stats.group).toBe(group);
      expect(heavy.stats.pool?.workflowId).toBe(poolWorkflowId(group));
      expect(heavy.rows).toEqual(light.rows);
      expect(heavy.types).toEqual(light.types);
      // Integers of both signs keep their type on the heavy route too, read cold by the new backends.
      const { body: signed } = await cluster.query(
        'SELECT x, sum(x) OVER (ORDER BY x) AS running FROM signed ORDER BY x',
      );
      expect(signed.stats.group).toBe(group);
      expect({ rows: signed.rows, types: signed.types }).toEqual({
        rows: [
          [-1, -1],
          [3, 2],
        ],
        types: ['BIGINT', 'HUGEINT'],
      });

      const up = await poolStatus({ client, group });
      expect(up).toMatchObject({
        phase: 'ready',
        serveReady: true,
        target: 2,
        replicasPatched: 2,
        podsRunning: 2,
        aliveBackends: 2,
        patches: 1,
      });
      expect(up.layersPassed).toEqual(['pods', 'backends', 'canary']);
      // It ran on a proven backend of the pool.
      expect(up.backends).toEqual(expect.arrayContaining(Object.keys(heavy.stats.nodes)));

      // Idle for the timeout: drained, leases released, replicas to zero, parked, processes gone.
      await cluster.meta.acquireLease(`compaction:${group}`, group, 600_000);
      await expect.poll(async () => (await poolStatus({ client, group })).phase, { timeout: 30_000 }).toBe('parked');
      expect(await poolStatus({ client, group })).toMatchObject({
        target: 0,
        replicasPatched: 0,
        patches: 2,
        serveReady: false,
        backends: [],
      });
      await expect.poll(() => platform.runningPods(group), { timeout: 10_000 }).toBe(0);
      expect((await cluster.meta.acquireLease(`compaction:${group}`, 'another-group', 1_000)).granted).toBe(true);
    },
  );

  it(
    'answers a heavy query over the PostgreSQL protocol: psql hears the pool launch from zero, then gets the rows',
    { timeout: 180_000 },
    async () => {
      await expect.poll(async () => (await poolStatus({ client, group })).phase, { timeout: 30_000 }).toBe('parked');
      const light = await cluster.coordinator.queries.queryOnGroup(HEAVY_SQL, 'serving');
      const url = cluster.coordinator.postgresUrl!.replace('postgres://', 'postgres://berth@');
      const { code, stdout, stderr } = await psql(url, TOKEN, ['-A', '-t', '-F', ',', '-c', HEAVY_SQL], {
        timeoutMs: 150_000,
      });
      expect(code, stderr).toBe(0);
      // While it waits, the pool's launch as NOTICEs (psql prints them on stderr), layer by layer.
      expect(stderr).toMatch(/^NOTICE: {2}the heavy pool is launching: /m);
      expect(stdout.trim().split('\n')).toEqual(light.rows.map((row) => row.map(String).join(',')));
      const status = await poolStatus({ client, group });
      expect(status.layersPassed).toEqual(['pods', 'backends', 'canary']);
      await expect.poll(async () => (await poolStatus({ client, group })).phase, { timeout: 30_000 }).toBe('parked');
    },
  );

  it(
    'sizes heavy capacity by bottleneck: memory-bound launches one backend of the memory class, scan-bound scales the scan group out by its increment, and each parks on its own',
    { timeout: 180_000 },
    async () => {
      const id = randomUUID().slice(0, 8);
      const [scanGroup, memoryGroup] = [`scan-${id}`, `memory-${id}`];
      groups.push(scanGroup, memoryGroup);
      // Every query that reads a byte is heavy here: `rows` splits are memory-bound, the rest scan-bound.
      const coordinator = await coordinatorFor(poolConfig(scanGroup), {
        memory: poolConfig(memoryGroup, { increment: 1, maxReplicas: 1 }),
        thresholds: { scanBytes: 1, memoryBytes: 1 },
      });
      // No sum of doubles: its last bits follow the order DuckDB adds in.
      const SCAN_SQL =
        'SELECT service, count(*) AS n, max(latency_ms) AS slowest FROM events GROUP BY service ORDER BY service';
      const [expectedMemory, expectedScan] = [
        await cluster.coordinator.queries.queryOnGroup(HEAVY_SQL, 'serving'),
        await cluster.coordinator.queries.queryOnGroup(SCAN_SQL, 'serving'),
      ];

      /** The answer is one DuckDB's, run on `group`'s pool for `bottleneck`. */
      const expectHeavy = (
        answer: Awaited<ReturnType<typeof ask>>,
        g: string,
        bottleneck: string,
        expected: { rows: unknown[][]; types: string[] },
      ) => {
        expect(answer.status, answer.body.message).toBe(200);
        expect(answer.body.stats).toMatchObject({
          group: g,
          verdict: { class: 'heavy', bottleneck },
          pool: { workflowId: poolWorkflowId(g) },
        });
        expect({ rows: answer.body.rows, types: answer.body.types }).toEqual({
          rows: expected.rows,
          types: expected.types,
        });
      };

      const memoryBound = await ask(coordinator.url, HEAVY_SQL);
      expectHeavy(memoryBound, memoryGroup, 'memory', expectedMemory);
      // One backend, scaled up not out: it ran every scan and the final stage.
      const [memoryBackend, ...others] = await cluster.meta.members(memoryGroup);
      expect(others).toEqual([]);
      expect((memoryBound.body.stats!.stages as { final: string }).final).toBe(memoryBackend!.id);
      expect(Object.keys(memoryBound.body.stats!.nodes as object)).toEqual([memoryBackend!.id]);
      expect(await poolStatus({ client, group: memoryGroup })).toMatchObject({
        phase: 'ready',
        target: 1,
        podsRunning: 1,
        aliveBackends: 1,
        patches: 1,
      });
      // Nothing launched the scan group.
      expect(await poolStatus({ client, group: scanGroup })).toMatchObject({ phase: 'parked', target: 0, patches: 0 });

      expectHeavy(await ask(coordinator.url, SCAN_SQL), scanGroup, 'scan', expectedScan);
      expect(await poolStatus({ client, group: scanGroup })).toMatchObject({
        phase: 'ready',
        target: 2,
        podsRunning: 2,
        aliveBackends: 2,
      });
      // Both are workload groups of their own.
      expect((await workload(coordinator.url, scanGroup)).running).toBe(0);
      expect((await workload(coordinator.url, memoryGroup)).running).toBe(0);

      // The Temporal Web UI says which shape each pool is, and what each patch was for: the first
      // run's summary and history, and the current details of the run now (the test's server
      // suggests continuing as new after 60 events, so the pool may be on a later run by now).
      for (const [g, shape] of [
        [memoryGroup, 'memory class: scaled up, one backend per launch'],
        [scanGroup, 'scan class: scaled out by 2'],
      ] as const) {
        const handle = client.workflow.getHandle(poolWorkflowId(g));
        expect((await handle.query(workflowMetadataQuery)).currentDetails).toBe(`heavy pool ${g} (${shape})`);
        const { firstRunId } = (await handle.describe()).raw.workflowExecutionInfo!;
        const firstRun = client.workflow.getHandle(poolWorkflowId(g), firstRunId!);
        expect(await (await firstRun.describe()).staticSummary()).toBe(`heavy pool ${g} (${shape})`);
        const summaries = (await firstRun.fetchHistory()).events!.flatMap((e) =>
          e.activityTaskScheduledEventAttributes && e.userMetadata?.summary?.data
            ? [JSON.parse(Buffer.from(e.userMetadata.summary.data).toString()) as string]
            : [],
        );
        expect(summaries).toContain(`patch ${g} replicas 0 → ${g === memoryGroup ? 1 : 2} (${shape})`);
      }

      // Each group's reaper parks it; every process of both is gone.
      for (const g of [memoryGroup, scanGroup]) {
        await expect
          .poll(async () => (await poolStatus({ client, group: g })).phase, { timeout: 30_000 })
          .toBe('parked');
        await expect.poll(() => platform.runningPods(g), { timeout: 10_000 }).toBe(0);
      }
    },
  );

  it(
    'answers right when the backend running a heavy query is lost, by moving its work once',
    { timeout: 120_000 },
    async () => {
      const first = await cluster.query(HEAVY_SQL); // launches the pool again
      expect(first.status).toBe(200);
      // A backend the query's scan stage ran on dies without a word: meta still lists it as alive.
      const [targetId] = Object.keys(first.body.stats.nodes);
      const target = (await cluster.meta.members(group)).find((m) => m.id === targetId)!;
      backends.get(target.url)!.child.kill('SIGKILL');
      await backends.get(target.url)!.exited;

      const second = await cluster.query(HEAVY_SQL);
      expect(second.status).toBe(200);
      expect(second.body.rows).toEqual(first.body.rows);
      // Each segment it owned moved once, to the next backend in its ranking.
      expect(second.body.stats.fallbacks).toBe((first.body.stats.nodes as Record<string, number>)[target.id]);
      expect(second.body.stats.nodes).not.toHaveProperty(target.id);
    },
  );

  it(
    'runs a heavy final stage once more on another proven backend when its backend is lost',
    { timeout: 120_000 },
    async () => {
      // A pool of two fresh backends: the one before parks once idle.
      await expect.poll(async () => (await poolStatus({ client, group })).phase, { timeout: 30_000 }).toBe('parked');
      const first = await cluster.query(HEAVY_SQL);
      expect(first.status).toBe(200);
      // The backend the next final stage goes to first (equal weights, none busy: the first by id)
      // dies without a word: meta and the pool still list it.
      const proven = (await poolStatus({ client, group })).backends.sort();
      expect(proven).toHaveLength(2);
      const members = await cluster.meta.members(group);
      const victim = members.find((m) => m.id === proven[0])!;
      const process = backends.get(victim.url)!;
      process.child.kill('SIGKILL');
      await process.exited;

      const second = await cluster.query(HEAVY_SQL);
      expect(second.status, second.body.message).toBe(200);
      expect(second.body.rows).toEqual(first.body.rows);
      expect(second.body.stats.stages.final).not.toBe(victim.id);
      expect(proven).toContain(second.body.stats.stages.final);
    },
  );

  it(
    'fails a heavy query with a 502 naming the final stage and its backend when the backend is lost twice, and leaves nothing running',
    { timeout: 120_000 },
    async () => {
      await expect.poll(async () => (await poolStatus({ client, group })).phase, { timeout: 30_000 }).toBe('parked');
      expect((await cluster.query(HEAVY_SQL)).status).toBe(200);
      // Both proven backends die without a word: meta and the pool still list them.
      const proven = (await poolStatus({ client, group })).backends.sort();
      expect(proven).toHaveLength(2);
      const members = await cluster.meta.members(group);
      for (const id of proven) {
        const process = backends.get(members.find((m) => m.id === id)!.url)!;
        process.child.kill('SIGKILL');
        await process.exited;
      }

      // Tried once more on the other backend, then answered with the second loss, in words.
      const lost = await ask(cluster.coordinator.url, HEAVY_SQL);
      expect(lost.status).toBe(502);
      expect(lost.body.error).toBe('final_stage_failed');
      expect(lost.body.message).toMatch(/^the final stage on heavy backend http:\/\/127\.0\.0\.1:\d+ failed: /);
      const urls = members.filter((m) => proven.includes(m.id)).map((m) => m.url);
      expect(urls.some((url) => lost.body.message!.includes(url))).toBe(true);

      // Idle again, the pool parks: replicas to zero and no process of the group left.
      await expect.poll(async () => (await poolStatus({ client, group })).phase, { timeout: 30_000 }).toBe('parked');
      expect(await poolStatus({ client, group })).toMatchObject({ target: 0, replicasPatched: 0 });
      await expect.poll(() => platform.runningPods(group), { timeout: 10_000 }).toBe(0);
    },
  );

  it(
    'returns a 50 MB heavy answer exactly as the light path does, and no workflow history holds it',
    { timeout: 180_000 },
    async () => {
      const light = await cluster.coordinator.queries.queryOnGroup(BIG_HEAVY_SQL, 'serving');
      const heavy = await ask(cluster.coordinator.url, BIG_HEAVY_SQL);
      expect(heavy.status).toBe(200);
      expect(heavy.body.stats).toMatchObject({ group, verdict: { class: 'heavy' } });
      const text = JSON.stringify(heavy.body.rows);
      expect(text.length).toBeGreaterThan(50_000_000);
      expect(text).toBe(JSON.stringify(light.rows));
      expect(heavy.body.types).toEqual(light.types);
      expect(await payloadsOver(client, poolWorkflowId(group), 64 * 1024)).toEqual([]);
    },
  );

  it(
    'shares one queue between two coordinators: 40 heavy queries at a parked pool all answer right, both read the same waiting, and the monitor raises the target',
    { timeout: 240_000 },
    async () => {
      const shared = `shared-${randomUUID().slice(0, 8)}`;
      groups.push(shared);
      const config = poolConfig(shared, {
        increment: 1,
        maxReplicas: 2,
        maxConcurrency: 1,
        monitorSustainMs: 500,
        idleTimeoutMs: 60_000,
      });
      const [one, two] = [await coordinatorFor(config), await coordinatorFor(config)];
      const expected = (await cluster.coordinator.queries.queryOnGroup(HEAVY_SQL, 'serving')).rows;

      const answers = Promise.all(Array.from({ length: 40 }, (_, i) => ask((i % 2 === 0 ? one : two).url, HEAVY_SQL)));
      // While the pool launches nothing runs: every query waits, and both coordinators say so alike.
      await expect.poll(async () => (await workload(one.url, shared)).waiting, { timeout: 60_000 }).toBe(40);
      expect(await workload(two.url, shared)).toEqual(await workload(one.url, shared));

      const done = await answers;
      expect(done.map((a) => a.status)).toEqual(Array(40).fill(200));
      for (const a of done) expect(a.body.rows).toEqual(expected);
      const status = await poolStatus({ client, group: shared });
      expect(status.target).toBe(2); // raised by the monitor: one query at a time kept 39 waiting
      expect(status.patches).toBeGreaterThanOrEqual(2);
      expect(await payloadsOver(client, poolWorkflowId(shared), 64 * 1024)).toEqual([]);
    },
  );

  it(
    'queues 1,000 heavy queries arriving together by its own rules: each answers, or is refused as queue full, never by a Temporal limit',
    { timeout: 300_000 },
    async () => {
      const crowd = `crowd-${randomUUID().slice(0, 8)}`;
      groups.push(crowd);
      const maxQueueSize = 300;
      const coordinator = await coordinatorFor(
        poolConfig(crowd, { increment: 1, maxReplicas: 1, maxConcurrency: 4, maxQueueSize, idleTimeoutMs: 60_000 }),
      );
      const expected = (await cluster.coordinator.queries.queryOnGroup(SMALL_HEAVY_SQL, 'serving')).rows;

      let mostWaiting = 0;
      let watching = true;
      const watch = (async () => {
        while (watching) {
          mostWaiting = Math.max(mostWaiting, (await poolStatus({ client, group: crowd })).waiting);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      })();
      const answers = await Promise.all(Array.from({ length: 1_000 }, () => ask(coordinator.url, SMALL_HEAVY_SQL)));
      watching = false;
      await watch;

      const answered = answers.filter((a) => a.status === 200);
      const refused = answers.filter((a) => a.status === 429);
      expect(answered.length + refused.length).toBe(1_000);
      expect(answered.length).toBeGreaterThanOrEqual(maxQueueSize);
      for (const a of answered) expect(a.body.rows).toEqual(expected);
      for (const r of refused) {
        expect(r.body.error).toBe('queue_full');
        expect(r.body.message).toMatch(/the heavy pool's queue is full \(300 queries waiting/);
        expect(Number(r.retryAfter)).toBeGreaterThan(0);
      }
      expect(mostWaiting).toBeLessThanOrEqual(maxQueueSize);
      expect(await payloadsOver(client, poolWorkflowId(crowd), 64 * 1024)).toEqual([]);
    },
  );

  it(
    'spills a heavy final stage past its backend’s memory; past its temp directory too it is a 413 with DuckDB’s reason, and the backend lives on',
    { timeout: 240_000 },
    async () => {
      const [tight, capped] = [`tight-${randomUUID().slice(0, 8)}`, `capped-${randomUUID().slice(0, 8)}`];
      groups.push(tight, capped);
      const light = await cluster.coordinator.queries.queryOnGroup(SPILLING_SQL, 'serving');
      expect(light.rows).toEqual([[2000 * 2000, 2000 * 2000]]);

      // BERTH_MAX_RESULT_BYTES caps the answer, not the scans' rows a heavy final stage spills.
      const one = await coordinatorFor(poolConfig(tight, { increment: 1, maxReplicas: 1 }), { maxResultBytes: 4096 });
      const spilled = await ask(one.url, SPILLING_SQL);
      expect(spilled.status, spilled.body.message).toBe(200);
      expect(spilled.body.rows).toEqual(light.rows);
      const [backend] = await cluster.meta.members(tight);
      expect(spilled.body.stats).toMatchObject({ group: tight, stages: { final: backend!.id } });
      const { scan } = spilled.body.stats!.stages as { scan: { bytes: number }[] };
      const sent = scan.reduce((sum, s) => sum + s.bytes, 0);
      expect(sent).toBeGreaterThan(4 * 4096);

      const two = await coordinatorFor(poolConfig(capped, { increment: 1, maxReplicas: 1 }));
      const refused = await ask(two.url, SPILLING_SQL);
      expect(refused.status, refused.body.message).toBe(413);
      expect(refused.body.error).toBe('query_state_too_large');
      expect(refused.body.message).toMatch(/memory 64MiB, temp directory 1MiB.*max_temp_directory_size/s);
      const [cappedBackend] = await cluster.meta.members(capped);
      const after = await ask(two.url, SMALL_HEAVY_SQL);
      expect(after.status, after.body.message).toBe(200);
      expect(after.body.stats).toMatchObject({ group: capped, stages: { final: cappedBackend!.id } });
    },
  );

  it(
    'drains a backend sent SIGTERM while it runs a final stage: the query answers exactly, then it leaves meta and exits 0',
    { timeout: 240_000 },
    async () => {
      const drain = `drain-${randomUUID().slice(0, 8)}`;
      groups.push(drain);
      const light = await cluster.coordinator.queries.queryOnGroup(SPILLING_SQL, 'serving');
      const coordinator = await coordinatorFor(poolConfig(drain));
      const answer = ask(coordinator.url, SPILLING_SQL);
      // The final stage's backend is the one the scans' rows went to: it is computing the window.
      let victim: { id: string; url: string } | undefined;
      await expect
        .poll(
          async () => {
            for (const member of await cluster.meta.members(drain))
              if ((await exchangeRows(member.url)) > 0) victim = member;
            return victim;
          },
          { timeout: 90_000, interval: 20 },
        )
        .toBeDefined();
      const process = backends.get(victim!.url)!;
      process.child.kill('SIGTERM');
      const signalled = Date.now();

      const { status, body } = await answer;
      expect(status, body.message).toBe(200);
      expect(body.rows).toEqual(light.rows);
      expect(await process.exited).toBe(0);
      // Within Kubernetes' default grace period of 30 s (a connection left open held it 72 s).
      expect(Date.now() - signalled).toBeLessThan(30_000);
      // It said it left: meta no longer lists it at all, where a crashed node stays listed as dead.
      expect((await cluster.meta.backends(drain)).map((b) => b.id)).not.toContain(victim!.id);
    },
  );

  it(
    'never serves on a backend that heartbeats but cannot read storage, and says why',
    { timeout: 120_000 },
    async () => {
      const liar = `liar-${randomUUID().slice(0, 8)}`;
      groups.push(liar);
      const options = {
        client,
        taskQueue,
        config: { group: liar, increment: 1, maxReplicas: 1, readinessConfirmMs: 100 },
      };
      await launchPool(options, 1);
      await expect
        .poll(async () => (await poolStatus({ client, group: liar })).phase, { timeout: 60_000 })
        .toBe('canary');
      await expect
        .poll(async () => (await poolStatus({ client, group: liar })).notReady ?? '', { timeout: 30_000 })
        .toMatch(/the canary scan failed on qn-[0-9a-f]+ \(.*the canary read from storage failed: .+\)/);
      const status = await poolStatus({ client, group: liar });
      expect(status).toMatchObject({
        serveReady: false,
        aliveBackends: 1,
        layersPassed: ['pods', 'backends'],
        backends: [],
      });
      expect((await cluster.meta.backends(liar)).map((b) => b.alive)).toEqual([true]); // it does heartbeat
      await client.workflow.getHandle(poolWorkflowId(liar)).terminate('test over');
      await platform.setReplicas(liar, 0);
    },
  );

  it(
    'fails the queries waiting for a pool that cannot become ready at its deadline, naming the layer that never passed',
    { timeout: 120_000 },
    async () => {
      const mute = `mute-${randomUUID().slice(0, 8)}`;
      groups.push(mute);
      // Long enough for the pods to start on a busy machine: the layer that fails is the backends'.
      const coordinator = await coordinatorFor(poolConfig(mute, { launchDeadlineMs: 15_000 }));
      const answers = await Promise.all([ask(coordinator.url, HEAVY_SQL), ask(coordinator.url, SMALL_HEAVY_SQL)]);
      for (const answer of answers) {
        expect(answer.status).toBe(503);
        expect(answer.body.error).toBe('pool_launch_failed');
        expect(answer.body.message).toMatch(
          /did not become serve-ready within 15 s: 2 of 2 pods running, but 0 of 2 new backends alive in meta/,
        );
      }
      const status = await poolStatus({ client, group: mute });
      expect(status).toMatchObject({ phase: 'parked', target: 0, replicasPatched: 0, serveReady: false });
      expect(status.lastFailure?.message).toBe(answers[0]!.body.message);
      await expect.poll(() => platform.runningPods(mute), { timeout: 30_000 }).toBe(0);
    },
  );

  it(
    'takes back the capacity of a pool whose workflow was terminated, within one reconcile interval',
    { timeout: 120_000 },
    async () => {
      const orphan = `orphan-${randomUUID().slice(0, 8)}`;
      await launchPool({ client, taskQueue, config: poolConfig(orphan) }, 2);
      await expect
        .poll(async () => (await poolStatus({ client, group: orphan })).serveReady, { timeout: 60_000 })
        .toBe(true);
      await client.workflow.getHandle(poolWorkflowId(orphan)).terminate('an operator ended it by hand');
      expect(await platform.replicas(orphan)).toBe(2); // nothing in the workflow can stop it now

      const scheduleId = `reconciler-${randomUUID()}`;
      await ensureReconcilerSchedule(client, { groups: [orphan], everyMs: 2_000, taskQueue, scheduleId });
      try {
        await expect.poll(() => platform.replicas(orphan), { timeout: 30_000 }).toBe(0);
        await expect.poll(() => platform.runningPods(orphan), { timeout: 30_000 }).toBe(0);
      } finally {
        await client.schedule.getHandle(scheduleId).delete();
      }
    },
  );
});

describe('a heavy pool launched before any data exists', () => {
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  let platform: LocalPlatform;
  const taskQueue = `pool-empty-${randomUUID()}`;
  const group = `empty-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2] });
    platform = new LocalPlatform({
      startBackend: (g, i) =>
        startServiceProcess(
          `${g}-${i}`,
          QUERY_NODE,
          {
            BERTH_TOKEN: TOKEN,
            BERTH_META_URL: cluster.metaUrl,
            BERTH_NODE_GROUP: g,
            BERTH_NODE_VCPUS: '1',
            BERTH_NODE_CACHE_DIR: `${cluster.dir}/${g}-${i}`,
            BERTH_HEARTBEAT_MS: String(FAST.heartbeatMs),
            BERTH_S3_ENDPOINT: cluster.s3.endpoint,
            BERTH_S3_ACCESS_KEY_ID: cluster.s3.credentials.accessKeyId,
            BERTH_S3_SECRET_ACCESS_KEY: cluster.s3.credentials.secretAccessKey,
            BERTH_S3_BUCKET: cluster.bucket,
            BERTH_LOG_LEVEL: 'warn',
          },
          `${cluster.dir}/${g}-${i}.log`,
        ),
    });
    client = await temporalClient();
    worker = await startWorker(cluster, taskQueue, { heavyPool: { platform } });
  });
  afterAll(async () => {
    await client?.workflow
      .getHandle(poolWorkflowId(group))
      .terminate('test over')
      .catch(() => {});
    await worker?.stop();
    await platform?.close();
    await client?.connection.close();
    await cluster?.close();
  });

  it('becomes serve-ready on Berth’s own canary object', { timeout: 120_000 }, async () => {
    expect(await cluster.meta.listTables()).toEqual([]);
    await launchPool(
      { client, taskQueue, config: { group, increment: 1, maxReplicas: 1, readinessConfirmMs: 100 } },
      1,
    );
    await expect.poll(async () => (await poolStatus({ client, group })).serveReady, { timeout: 60_000 }).toBe(true);
    expect((await poolStatus({ client, group })).layersPassed).toEqual(['pods', 'backends', 'canary']);
  });
});

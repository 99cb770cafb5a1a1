/**
 * Records one history of every workflow type into test/fixtures/histories/, for the replay tests
 * (test/replay.test.ts). Run it with `npm run record-histories` after a workflow change that ships
 * under a patch or as a new workflow type (docs/development.md: "Changing a workflow"), never to make a failing
 * replay test pass. The heavy pool runs with activity doubles (its command sequence is what
 * matters); merges, the janitor and the reconciler run against a real test cluster.
 */
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { HeavyPoolActivities } from '../../activities/heavy-pool.js';
import {
  launchPool,
  poolStatus,
  readAdmission,
  reportDemand,
  type PoolClientOptions,
} from '../../workflows/pool-client.js';
import type { PreflightActivities } from '../../activities/preflight.js';
import type { ServingScalerActivities } from '../../activities/serving-scaler.js';
import { preflightReport } from '../../core/preflight.js';
import { planServingChange } from '../../core/serving-scale.js';
import { reportServingLoad, servingScalerStatus } from '../../workflows/serving-scaler-client.js';
import { mergeTaskQueueFor } from '../../workflows/contracts/shared.js';
import { poolWorkflowId } from '../../workflows/contracts/heavy-pool.js';
import { mergeWorkflowId } from '../../workflows/contracts/segment-merge.js';
import { servingScalerWorkflowId, type ServingScalerConfig } from '../../workflows/contracts/serving-scaler.js';
import {
  janitorWorkflow,
  poolReconcilerWorkflow,
  preflightWorkflow,
  retentionWorkflow,
  rowDeleteWorkflow,
  tableDropWorkflow,
  tableMergeWorkflow,
} from '../../workflows/index.js';
import { startCluster, type TestCluster } from '../helpers/cluster.js';
import { workerTracingOptions } from '../../workers/tracing.js';
import { startWorker, temporalClient, workflowBundle, type RunningWorker } from '../helpers/berth-worker.js';
import { runsOf } from '../helpers/history.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/histories/', import.meta.url));

/** Saves every run of the workflow (continue-as-new makes several), oldest first: NAME.json, NAME-2.json, … */
async function save(client: Client, name: string, workflowId: string): Promise<void> {
  const runs = (await runsOf(client, workflowId)).reverse();
  for (const [i, runId] of runs.entries()) {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    await writeFile(`${FIXTURES}${name}${i === 0 ? '' : `-${i + 1}`}.json`, `${historyToJSON(history)}\n`);
  }
}

const poolDoubles = (replicas: Map<string, number>): HeavyPoolActivities => ({
  async setReplicas({ group, replicas: n }) {
    const previous = replicas.get(group) ?? 0;
    replicas.set(group, n);
    return { changed: previous !== n, previous };
  },
  async observePool({ group }) {
    const n = group.startsWith('stuck') ? 0 : (replicas.get(group) ?? 0);
    return {
      pods: replicas.get(group) ?? 0,
      backends: Array.from({ length: n }, (_, i) => ({ id: `${group}-${i}`, url: 'http://127.0.0.1:9' })),
      confirmed: n > 0,
    };
  },
  async canaryScan({ backends }) {
    return backends.map((b) => ({ id: b.id, ok: true }));
  },
  async releaseGroupLeases() {
    return [];
  },
  async parkOrphanedGroups({ groups }) {
    return {
      parked: groups.filter((g) => (replicas.get(g) ?? 0) > 0).map((g) => ({ group: g, replicas: replicas.get(g)! })),
    };
  },
});

describe('recording workflow histories', () => {
  let client: Client;
  let cluster: TestCluster;
  let worker: RunningWorker;
  let connection: NativeConnection;
  let poolWorker: Worker;
  let poolRunning: Promise<void>;
  const taskQueue = `record-${randomUUID()}`;
  const poolQueue = `record-pool-${randomUUID()}`;
  const replicas = new Map<string, number>();

  beforeAll(async () => {
    client = await temporalClient();
    cluster = await startCluster({ vcpus: [2, 2] });
    worker = await startWorker(cluster, taskQueue);
    connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    const preflightDouble: PreflightActivities = {
      async preflight({ group }) {
        return preflightReport(group, 'local', [
          { area: 'requests', ok: false, summary: 'recorded', detail: ['8 > 7.9'] },
        ]);
      },
    };
    const servingDoubles: ServingScalerActivities = {
      async servingReplicas({ group }) {
        return replicas.get(group) ?? 1;
      },
      async planServingStep({ from, to, reason }) {
        return planServingChange({ weights: Array(from).fill(2), from, to, totalBytes: 1_000, reason, at: 0 });
      },
      async scaleServing({ group, replicas: n }) {
        const previous = replicas.get(group) ?? 1;
        replicas.set(group, n);
        return { changed: previous !== n, previous };
      },
    };
    poolWorker = await Worker.create({
      connection,
      taskQueue: poolQueue,
      workflowBundle: await workflowBundle(),
      ...workerTracingOptions(),
      activities: { ...poolDoubles(replicas), ...preflightDouble, ...servingDoubles },
    });
    poolRunning = poolWorker.run();
  });
  afterAll(async () => {
    poolWorker?.shutdown();
    await poolRunning;
    await connection?.close();
    await worker?.stop();
    await cluster?.close();
    await client?.connection.close();
  });

  it(
    'records a heavy pool launched by demand, serving, raised by the monitor, then parked by the reaper',
    { timeout: 120_000 },
    async () => {
      const group = 'recorded';
      const options: PoolClientOptions = {
        client,
        taskQueue: poolQueue,
        config: {
          group,
          increment: 1,
          maxReplicas: 2,
          maxConcurrency: 1,
          monitorSustainMs: 300,
          idleTimeoutMs: 1_500,
          readinessConfirmMs: 20,
        },
      };
      await reportDemand(options, { coordinator: 'c1', running: 0, waiting: 3 });
      await expect.poll(async () => (await readAdmission(options, 'c1')).grant, { timeout: 20_000 }).toBe(1);
      await reportDemand(options, { coordinator: 'c1', running: 1, waiting: 2, epoch: 0 });
      await expect.poll(async () => (await poolStatus({ client, group })).replicasPatched, { timeout: 20_000 }).toBe(2);
      await launchPool(options, 2);
      await reportDemand(options, { coordinator: 'c1', running: 0, waiting: 0, epoch: 0 });
      await expect.poll(async () => (await poolStatus({ client, group })).phase, { timeout: 20_000 }).toBe('parked');
      await client.workflow.getHandle(poolWorkflowId(group)).terminate('recorded');
      await save(client, 'heavy-pool-serve-raise-reap', poolWorkflowId(group));
    },
  );

  it('records a heavy pool whose launch misses its deadline', { timeout: 60_000 }, async () => {
    const group = 'stuck-recorded';
    const options: PoolClientOptions = {
      client,
      taskQueue: poolQueue,
      config: { group, increment: 1, maxReplicas: 1, launchDeadlineMs: 1_000, readinessWaitMs: 200 },
    };
    await reportDemand(options, { coordinator: 'c1', running: 0, waiting: 1 });
    await expect
      .poll(async () => (await poolStatus({ client, group })).lastFailure?.epoch, { timeout: 20_000 })
      .toBe(1);
    await client.workflow.getHandle(poolWorkflowId(group)).terminate('recorded');
    await save(client, 'heavy-pool-launch-deadline', poolWorkflowId(group));
  });

  it(
    'records a serving autoscaler adding a node for waiting queries and giving it back when idle',
    { timeout: 60_000 },
    async () => {
      const config: ServingScalerConfig = {
        group: 'serving-recorded',
        floor: 1,
        max: 2,
        sustainMs: 300,
        idleMs: 1_000,
      };
      const options = { client, config, taskQueue: poolQueue };
      await reportServingLoad(options, { coordinator: 'c1', running: 1, waiting: 4 });
      await expect.poll(async () => (await servingScalerStatus(options)).replicas, { timeout: 20_000 }).toBe(2);
      await reportServingLoad(options, { coordinator: 'c1', running: 0, waiting: 0 });
      await expect.poll(async () => (await servingScalerStatus(options)).steps.length, { timeout: 20_000 }).toBe(2);
      await client.workflow.getHandle(servingScalerWorkflowId(config.group)).terminate('recorded');
      await save(client, 'serving-scaler', servingScalerWorkflowId(config.group));
    },
  );

  it('records a preflight', async () => {
    const workflowId = `preflight-recorded-${randomUUID()}`;
    const report = await client.workflow.execute(preflightWorkflow, {
      taskQueue: poolQueue,
      workflowId,
      args: [{ group: 'recorded' }],
    });
    expect(report.findings).toBe(1);
    await save(client, 'preflight', workflowId);
  });

  it('records the reconciler', async () => {
    replicas.set('orphaned', 2);
    const workflowId = `reconciler-${randomUUID()}`;
    await client.workflow.execute(poolReconcilerWorkflow, {
      taskQueue: poolQueue,
      workflowId,
      args: [{ groups: ['orphaned', 'recorded'] }],
    });
    await save(client, 'pool-reconciler', workflowId);
  });

  it('records a table merge with its segment merge child, and the janitor', { timeout: 120_000 }, async () => {
    await cluster.ingestEvents('events', 12, 40);
    const tableWorkflowId = `merge-events-recorded-${randomUUID()}`;
    const result = await client.workflow.execute(tableMergeWorkflow, {
      taskQueue: mergeTaskQueueFor(taskQueue),
      workflowId: tableWorkflowId,
      args: [{ table: 'events', minInputs: 2 }],
    });
    expect(result.partitions.map((p) => p.outcome)).toContain('merged');
    await save(client, 'table-merge', tableWorkflowId);
    await save(client, 'segment-merge', mergeWorkflowId('events', '20261101'));
    const janitorId = `janitor-recorded-${randomUUID()}`;
    await client.workflow.execute(janitorWorkflow, {
      taskQueue: mergeTaskQueueFor(taskQueue),
      workflowId: janitorId,
      args: [{ graceMs: 0 }],
    });
    await save(client, 'janitor', janitorId);
  });

  it('records a retention run that retires a segment', { timeout: 120_000 }, async () => {
    // One batch two days old, under a day's retention.
    const old = new Date(Date.now() - 2 * 86_400_000).toISOString();
    expect((await cluster.ingest('aged', `${JSON.stringify({ ts: old, n: 1 })}\n`)).status).toBe(200);
    await cluster.meta.setRetention('aged', 86_400_000);
    const retentionId = `retention-recorded-${randomUUID()}`;
    const retired = await client.workflow.execute(retentionWorkflow, {
      taskQueue: mergeTaskQueueFor(taskQueue),
      workflowId: retentionId,
    });
    expect(retired.segments).toBe(1);
    await save(client, 'retention', retentionId);
  });

  it('records a table drop that retires its segments', { timeout: 120_000 }, async () => {
    for (let i = 0; i < 2; i++)
      expect((await cluster.ingest('doomed', `${JSON.stringify({ ts: '2026-11-01T00:00:00Z', n: i })}\n`)).status).toBe(
        200,
      );
    const { incarnation } = (await cluster.meta.findTable('doomed'))!;
    await cluster.meta.dropTable('doomed', incarnation);
    const dropId = `drop-recorded-${randomUUID()}`;
    const retired = await client.workflow.execute(tableDropWorkflow, {
      taskQueue: mergeTaskQueueFor(taskQueue),
      workflowId: dropId,
      args: [{ table: 'doomed', incarnation }],
    });
    expect(retired.segments).toBe(2);
    await save(client, 'table-drop', dropId);
  });

  it('records a delete by predicate that rewrites a segment', { timeout: 120_000 }, async () => {
    const rows = [0, 1, 2].map((n) => JSON.stringify({ ts: '2026-11-01T00:00:00Z', n })).join('\n');
    expect((await cluster.ingest('erased', `${rows}\n`)).status).toBe(200);
    const { incarnation } = (await cluster.meta.findTable('erased'))!;
    const { id, predicate, from, to } = await cluster.meta.requestDelete('erased', {
      incarnation,
      predicate: 'SELECT *, (n = 1) AS berth_delete FROM erased',
    });
    const deleteId = `delete-recorded-${randomUUID()}`;
    const result = await client.workflow.execute(rowDeleteWorkflow, {
      taskQueue: mergeTaskQueueFor(taskQueue),
      workflowId: deleteId,
      args: [{ id, table: 'erased', incarnation, predicate, from, to }],
    });
    expect(result).toMatchObject({ rowsRemoved: 1, segmentsRewritten: 1 });
    await save(client, 'row-delete', deleteId);
  });
});

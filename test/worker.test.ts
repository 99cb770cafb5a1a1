/**
 * The worker's lifecycle and its long steps, on the real dev server: pool control and merges on
 * separate task queues; heartbeats with progress; the merge lease kept alive past its TTL while a
 * step runs; cancellation reaching the push (fetch) and DuckDB; a graceful stop that hands an
 * interrupted merge to another worker; the prebuilt workflow bundle.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CancelledFailure, defaultPayloadConverter, WorkflowFailedError, type Client } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { openSandboxedDuckDB, withConnection } from '../services/common/duckdb.js';
import { launchPool } from '../workflows/pool-client.js';
import { mergeTaskQueueFor } from '../workflows/contracts/shared.js';
import { poolWorkflowId } from '../workflows/contracts/heavy-pool.js';
import type { MergeResult } from '../workflows/contracts/segment-merge.js';
import { segmentMergeWorkflow } from '../workflows/index.js';
import { spawnWorkerProcess, startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';
import { recordingPlatform } from './fakes/recording-platform.js';
import { startHoldingOwner, type HoldingOwner } from './helpers/holding-owner.js';

const PARTITION = '20261101';
const leaseName = (table: string) => `merge:${table}:${PARTITION}:l0`;

describe('a worker’s merges', () => {
  let cluster: TestCluster;
  let client: Client;
  let owner: HoldingOwner;
  let worker: RunningWorker | undefined;
  const { platform, replicas } = recordingPlatform();
  const pending = async (workflowId: string) => {
    const { raw } = await client.workflow.getHandle(workflowId).describe();
    return (raw.pendingActivities ?? []).map((a) => ({
      type: a.activityType?.name,
      details: a.heartbeatDetails?.payloads?.map((p) => defaultPayloadConverter.fromPayload(p)),
    }));
  };

  beforeAll(async () => {
    // A short expiry: the fake owner must heartbeat to stay the owner through every test here.
    cluster = await startCluster({ vcpus: [], expiryMs: 5_000 });
    client = await temporalClient();
    owner = await startHoldingOwner(cluster);
  });
  afterEach(async () => {
    owner.releaseAll();
    await worker?.stop();
    worker = undefined;
  });
  afterAll(async () => {
    await client?.connection.close();
    await owner?.close();
    await cluster?.close();
  });

  it('launches the pool while a long merge holds every merge slot', async () => {
    const queue = `lanes-${randomUUID()}`;
    worker = await startWorker(cluster, queue, { mergeConcurrency: 1, heavyPool: { platform } });
    await cluster.ingestEvents('lanes', 3, 20);
    const arrivedBefore = owner.held.length;
    const merge = client.workflow.execute(segmentMergeWorkflow, {
      taskQueue: mergeTaskQueueFor(queue),
      workflowId: `lanes-${randomUUID()}`,
      args: [{ table: 'lanes', partition: PARTITION }],
    });
    await expect.poll(() => owner.held.length, { timeout: 30_000 }).toBe(arrivedBefore + 1); // its push holds the only merge slot
    let settled = false;
    void merge.finally(() => (settled = true));

    const group = `lanes-${randomUUID().slice(0, 8)}`;
    const accepted = await launchPool({ client, taskQueue: queue, config: { group, increment: 2, maxReplicas: 2 } }, 1);
    expect(accepted.accepted).toBe(2);
    await expect.poll(() => replicas.get(group), { timeout: 20_000 }).toBe(2);
    expect(settled).toBe(false); // launched while the merge was still pushing

    owner.releaseAll();
    expect((await merge).outcome).toBe('merged');
    await client.workflow.getHandle(poolWorkflowId(group)).terminate('test over');
  });

  it('heartbeats its progress, and keeps its lease past the TTL while a step runs', async () => {
    const queue = `lease-${randomUUID()}`;
    worker = await startWorker(cluster, queue);
    await cluster.ingestEvents('leased', 3, 20);
    const workflowId = `lease-${randomUUID()}`;
    const arrivals = owner.held.length;
    const merge = client.workflow.execute(segmentMergeWorkflow, {
      taskQueue: mergeTaskQueueFor(queue),
      workflowId,
      args: [{ table: 'leased', partition: PARTITION, leaseTtlMs: 1_500, heartbeatTimeoutMs: 5_000 }],
    });
    await expect.poll(() => owner.held.length, { timeout: 30_000 }).toBe(arrivals + 1);

    // Held for three TTLs: another holder never gets the lease, because the merge step renews it while it pushes.
    const until = Date.now() + 4_500;
    while (Date.now() < until) {
      expect((await cluster.meta.acquireLease(leaseName('leased'), 'intruder', 60_000)).granted).toBe(false);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    await expect
      .poll(async () => (await pending(workflowId))[0], { timeout: 20_000 })
      .toMatchObject({
        type: 'mergePushAndCommit',
        details: [{ step: 'push', merged: { table: 'leased', rows: 60, bytes: expect.any(Number) } }],
      });

    owner.releaseAll();
    const result: MergeResult = await merge;
    expect(result).toMatchObject({ outcome: 'merged', push: { accepted: true, owner: owner.id } });
    expect((await cluster.meta.acquireLease(leaseName('leased'), 'intruder', 1)).granted).toBe(true); // released at the end
  });

  it('stops a cancelled merge’s push at once and releases its lease', async () => {
    const queue = `cancel-${randomUUID()}`;
    worker = await startWorker(cluster, queue);
    await cluster.ingestEvents('cancelled', 3, 20);
    const abandoned = owner.abandoned;
    const arrivals = owner.held.length;
    const handle = await client.workflow.start(segmentMergeWorkflow, {
      taskQueue: mergeTaskQueueFor(queue),
      workflowId: `cancel-${randomUUID()}`,
      args: [{ table: 'cancelled', partition: PARTITION, heartbeatTimeoutMs: 2_000 }],
    });
    await expect.poll(() => owner.held.length, { timeout: 30_000 }).toBe(arrivals + 1);
    await handle.cancel();
    await expect.poll(() => owner.abandoned, { timeout: 20_000 }).toBe(abandoned + 1); // the push request itself was aborted
    const failure = await handle.result().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(WorkflowFailedError);
    expect((failure as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    expect((await cluster.meta.acquireLease(leaseName('cancelled'), 'intruder', 1)).granted).toBe(true);
    expect(await cluster.meta.listSegments('cancelled')).toHaveLength(3); // nothing committed
  });

  it(
    'stops gracefully on SIGTERM: the push in flight is aborted after the grace time, and another worker finishes the merge',
    { timeout: 180_000 },
    async () => {
      const queue = `graceful-${randomUUID()}`;
      await cluster.ingestEvents('graceful', 3, 20);
      const before = await cluster.meta.listSegments('graceful');
      const { child, exited, stderr } = spawnWorkerProcess(cluster, queue, { BERTH_WORKER_SHUTDOWN_GRACE_MS: '1000' });
      void exited.then(
        () => child.exitCode !== 0 && console.error(`the worker process exited with ${child.exitCode}: ${stderr()}`),
      );
      onTestFinished(() => void (child.exitCode === null && child.signalCode === null && child.kill('SIGKILL'))); // even when the test fails
      const arrivals = owner.held.length;
      const abandoned = owner.abandoned;
      const handle = await client.workflow.start(segmentMergeWorkflow, {
        taskQueue: mergeTaskQueueFor(queue),
        workflowId: `graceful-${randomUUID()}`,
        args: [{ table: 'graceful', partition: PARTITION, heartbeatTimeoutMs: 10_000 }],
      });
      await expect.poll(() => owner.held.length, { timeout: 120_000 }).toBe(arrivals + 1);

      const stopped = Date.now();
      child.kill('SIGTERM');
      await exited;
      expect(child.exitCode).toBe(0);
      expect(Date.now() - stopped).toBeLessThan(15_000); // grace 1 s, then the cancelled push stops
      expect(owner.abandoned).toBe(abandoned + 1);

      worker = await startWorker(cluster, queue);
      await expect.poll(() => owner.held.length, { timeout: 30_000 }).toBe(1);
      owner.releaseAll();
      const result: MergeResult = await handle.result();
      expect(result.outcome).toBe('merged');
      expect(result.inputs.sort()).toEqual(before.map((s) => s.id).sort());
    },
  );

  it('refuses to start without the workflow bundle `npm run build` writes, instead of bundling', async () => {
    const { child, exited, stderr } = spawnWorkerProcess(cluster, `nobundle-${randomUUID()}`, {
      BERTH_WORKFLOW_BUNDLE: path.join(os.tmpdir(), `missing-${randomUUID()}.js`),
    });
    await exited;
    expect(child.exitCode).not.toBe(0);
    expect(stderr()).toMatch(/the workflow bundle .*missing-.*\.js is missing: `npm run build` writes it/);
  });
});

describe('a cancelled DuckDB query', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-duckdb-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('is interrupted when its signal aborts, and rejects with the reason', async () => {
    const duckdb = await openSandboxedDuckDB({ allowedDirectories: [dir], tempDirectory: dir, threads: 1 });
    try {
      const controller = new AbortController();
      const reason = new Error('cancelled by the test');
      setTimeout(() => controller.abort(reason), 300);
      const started = Date.now();
      // Minutes of work for one thread.
      const query = withConnection(
        duckdb,
        (c) => c.runAndReadAll('SELECT sum(hash(i)) FROM range(100000000000) t(i)'),
        controller.signal,
      );
      await expect(query).rejects.toBe(reason);
      expect(Date.now() - started).toBeLessThan(10_000);
      // The instance still answers afterwards.
      expect((await withConnection(duckdb, (c) => c.runAndReadAll('SELECT 42'))).getRows()).toEqual([[42]]);
    } finally {
      duckdb.closeSync();
    }
  });
});

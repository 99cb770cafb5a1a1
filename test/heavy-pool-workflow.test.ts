/**
 * The heavy pool workflow's own logic on a real Temporal dev server, with its activities replaced
 * by test doubles (typed as the real ones) so that the platform can be steered, and coordinators
 * played by reporting demand exactly as the coordinator's admission does: the monitor's raise on
 * a real queue, the reaper and its cancellation, deadlines and failures that park the pool, and
 * continue-as-new while busy.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { HeavyPoolActivities } from '../activities/heavy-pool.js';
import {
  launchPool,
  poolStatus,
  readAdmission,
  reportDemand,
  type PoolClientOptions,
} from '../workflows/pool-client.js';
import { registerSearchAttributes } from '../workers/search-attributes.js';
import { poolWorkflowId, type PoolConfig } from '../workflows/contracts/heavy-pool.js';
import { workerTracingOptions } from '../workers/tracing.js';
import { temporalClient, workflowBundle } from './helpers/berth-worker.js';
import { payloadsOver, runsOf } from './helpers/history.js';

/**
 * A platform the test controls: pods and backends come up as soon as replicas are set, except for
 * groups named `stuck-…` (pods run, no backend ever registers) and `broken-…` (the canary is refused).
 */
function fakeActivities() {
  const state = {
    replicas: new Map<string, number>(),
    patches: [] as [string, number][],
    releasedLeases: 0,
    releaseGate: Promise.resolve(),
  };
  const activities: HeavyPoolActivities = {
    async setReplicas({ group, replicas }) {
      const previous = state.replicas.get(group) ?? 0;
      if (previous === replicas) return { changed: false, previous };
      state.replicas.set(group, replicas);
      state.patches.push([group, replicas]);
      return { changed: true, previous };
    },
    async observePool({ group, waitMs }) {
      const n = state.replicas.get(group) ?? 0;
      if (group.startsWith('stuck-')) {
        await new Promise((resolve) => setTimeout(resolve, Math.min(waitMs, 200)));
        return { pods: n, backends: [], confirmed: false };
      }
      return {
        pods: n,
        backends: Array.from({ length: n }, (_, i) => ({ id: `${group}-${i}`, url: 'http://127.0.0.1:9' })),
        confirmed: true,
      };
    },
    async canaryScan({ backends }) {
      if (backends.some((b) => b.id.startsWith('broken-')))
        throw ApplicationFailure.nonRetryable('storage refused the canary object: access denied', 'AccessDenied');
      return backends.map((b) => ({ id: b.id, ok: true }));
    },
    async releaseGroupLeases() {
      await state.releaseGate;
      state.releasedLeases++;
      return [];
    },
    async parkOrphanedGroups() {
      return { parked: [] };
    },
  };
  return { state, activities };
}

describe('the heavy pool workflow', () => {
  let client: Client;
  let connection: NativeConnection;
  let worker: Worker;
  let running: Promise<void>;
  const fake = fakeActivities();
  const taskQueue = `pool-logic-${randomUUID()}`;
  const pool = (group: string, config: Partial<PoolConfig> = {}): PoolClientOptions => ({
    client,
    taskQueue,
    config: {
      group,
      increment: 1,
      maxReplicas: 3,
      readinessConfirmMs: 20,
      monitorSustainMs: 500,
      idleTimeoutMs: 600_000,
      maxConcurrency: 2,
      maxQueueSize: 100,
      ...config,
    },
  });
  const status = (group: string) => poolStatus({ client, group });
  const terminate = (group: string) => client.workflow.getHandle(poolWorkflowId(group)).terminate('test over');

  beforeAll(async () => {
    client = await temporalClient();
    connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    await registerSearchAttributes(connection, 'default'); // as every Berth worker does before it polls
    worker = await Worker.create({
      connection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      ...workerTracingOptions(),
      activities: fake.activities,
    });
    running = worker.run();
  });
  afterAll(async () => {
    worker.shutdown();
    await running;
    await connection.close();
    await client.connection.close();
  });

  it('launches on demand, admits by counts, and raises the target by one increment on sustained waiting, never past the maximum', async () => {
    const group = `monitor-${randomUUID().slice(0, 8)}`;
    // A coordinator with 5 heavy queries arrives at a parked pool: the report launches it.
    const first = await reportDemand(pool(group), { coordinator: 'c1', running: 0, waiting: 5 });
    expect(first).toMatchObject({ grant: 0, queued: 5, serveReady: false });
    await expect.poll(async () => (await readAdmission(pool(group), 'c1')).grant, { timeout: 20_000 }).toBe(2); // max_concurrency 2
    // It runs two; three keep waiting: sustained waiting raises the target one step at a time, capped at 3.
    await reportDemand(pool(group), { coordinator: 'c1', running: 2, waiting: 3, epoch: 0 });
    await expect.poll(async () => (await status(group)).replicasPatched, { timeout: 20_000 }).toBe(3);
    expect(fake.state.patches.filter(([g]) => g === group).map(([, n]) => n)).toEqual([1, 2, 3]);
    expect(await status(group)).toMatchObject({ target: 3, running: 2, waiting: 3, coordinators: 1, serveReady: true });
    await terminate(group);
  });

  it('never grants past max_concurrency or queues past max_queue_size over several coordinators, and takes nothing back', async () => {
    const group = `admit-${randomUUID().slice(0, 8)}`;
    const options = pool(group, { maxConcurrency: 3, maxQueueSize: 4 });
    await launchPool(options, 1);
    await expect.poll(async () => (await status(group)).serveReady, { timeout: 20_000 }).toBe(true);
    const a = await reportDemand(options, { coordinator: 'a', running: 0, waiting: 5 });
    const b = await reportDemand(options, { coordinator: 'b', running: 0, waiting: 5 });
    expect(a).toMatchObject({ grant: 3, queued: 4 }); // the first report takes what there is
    expect(b).toMatchObject({ grant: 0, queued: 0 }); // nothing is taken back from a
    // a runs its 3 and drops what did not fit; b's next report finds the room a leaves.
    await reportDemand(options, { coordinator: 'a', running: 3, waiting: 1, epoch: 0 });
    const b2 = await reportDemand(options, { coordinator: 'b', running: 0, waiting: 5, epoch: 0 });
    expect(b2).toMatchObject({ grant: 0, queued: 3 });
    // a finishes: its slots go to b.
    await reportDemand(options, { coordinator: 'a', running: 0, waiting: 0, epoch: 0 });
    expect(await readAdmission(options, 'b')).toMatchObject({ grant: 3, queued: 3 });
    await terminate(group);
  });

  it('parks after the idle timeout, and a launch arriving while it drains cancels the reap', async () => {
    const group = `reaper-${randomUUID().slice(0, 8)}`;
    let openGate: () => void = () => {};
    fake.state.releaseGate = new Promise<void>((resolve) => (openGate = resolve));
    // Long enough that the relaunched pool stays ready for a few status polls on a busy machine.
    const idle = { idleTimeoutMs: 3_000 };
    await launchPool(pool(group, idle), 1);
    await expect.poll(async () => (await status(group)).phase, { timeout: 20_000 }).toBe('draining');
    await launchPool(pool(group, idle), 1); // arrives while the reaper drains
    openGate();
    await expect.poll(async () => (await status(group)).phase, { timeout: 20_000 }).toBe('ready');
    expect(fake.state.replicas.get(group)).toBe(1); // never patched to zero

    // Left alone, the next idle timeout parks it for real.
    await expect.poll(async () => (await status(group)).phase, { timeout: 20_000 }).toBe('parked');
    expect(fake.state.patches.filter(([g]) => g === group).map(([, n]) => n)).toEqual([1, 0]);
    await terminate(group);
  });

  it('fails a launch that misses its deadline, naming the layer that never passed, and parks', async () => {
    const group = `stuck-${randomUUID().slice(0, 8)}`;
    const options = pool(group, { increment: 2, maxReplicas: 2, launchDeadlineMs: 3_000, readinessWaitMs: 500 });
    await reportDemand(options, { coordinator: 'c1', running: 0, waiting: 2 });
    await expect.poll(async () => (await status(group)).phase, { timeout: 30_000 }).toBe('parked');
    const parked = await status(group);
    expect(parked).toMatchObject({ target: 0, replicasPatched: 0, serveReady: false });
    expect(parked.lastFailure?.message).toMatch(
      /did not become serve-ready within 3 s: 2 of 2 pods running, but 0 of 2 new backends alive in meta/,
    );
    // The coordinator learns it from its next read: its waiting queries are answered with this message.
    expect(await readAdmission(options, 'c1')).toMatchObject({
      epoch: 1,
      serveReady: false,
      lastFailure: { epoch: 1 },
    });
    // Its stale demand (from before the failure) launches nothing; demand that knows of it does.
    await reportDemand(options, { coordinator: 'c1', running: 0, waiting: 2, epoch: 0 });
    expect((await status(group)).target).toBe(0);
    await reportDemand(options, { coordinator: 'c1', running: 0, waiting: 1, epoch: 1 });
    expect((await status(group)).target).toBe(2);
    await terminate(group);
  });

  it('parks, with replicas at zero, when a step fails for good, and says why instead of failing the workflow', async () => {
    const group = `broken-${randomUUID().slice(0, 8)}`;
    await launchPool(pool(group), 1);
    await expect
      .poll(async () => ((s) => s.lastFailure !== undefined && s.phase)(await status(group)), { timeout: 30_000 })
      .toBe('parked');
    const parked = await status(group);
    expect(parked).toMatchObject({ replicasPatched: 0, serveReady: false });
    expect(parked.lastFailure?.message).toMatch(/storage refused the canary object: access denied/);
    expect(fake.state.replicas.get(group)).toBe(0);
    const description = await client.workflow.getHandle(poolWorkflowId(group)).describe();
    expect(description.status.name).toBe('RUNNING');
    await terminate(group);
  });

  it('continues as new while busy, carrying every admitted and queued query across', { timeout: 120_000 }, async () => {
    const group = `busy-${randomUUID().slice(0, 8)}`;
    const options = pool(group, { maxConcurrency: 2, maxQueueSize: 50, monitorSustainMs: 600_000 });
    await reportDemand(options, { coordinator: 'steady', running: 0, waiting: 7 });
    await expect.poll(async () => (await readAdmission(options, 'steady')).grant, { timeout: 20_000 }).toBe(2);
    await reportDemand(options, { coordinator: 'steady', running: 2, waiting: 5, epoch: 0 });
    // Another coordinator's traffic grows the history (the test server suggests continue-as-new at 60 events).
    const runs = async () => (await runsOf(client, poolWorkflowId(group))).length;
    for (let i = 0; (await runs()) < 4 && i < 200; i++)
      await reportDemand(options, { coordinator: 'chatty', running: 0, waiting: i % 2, epoch: 0 });
    expect(await runs()).toBeGreaterThanOrEqual(4);
    expect(await readAdmission(options, 'steady')).toMatchObject({ grant: 2, queued: 5, serveReady: true });
    expect(await status(group)).toMatchObject({ phase: 'ready', running: 2, replicasPatched: 1, patches: 1 });
    // The pool's history stays small: no payload in it grows with the data.
    expect(await payloadsOver(client, poolWorkflowId(group), 64 * 1024)).toEqual([]);
    await terminate(group);
  });
});

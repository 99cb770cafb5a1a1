/**
 * The heavy pool workflow's own logic on a real Temporal dev server, with its activities replaced
 * by test doubles (typed as the real ones) so that the platform and the workload can be steered:
 * the monitor's raise and the reaper's cancellation.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { HeavyPoolActivities } from '../activities/heavy-pool.js';
import { launchPool, poolStatus, type PoolClientOptions } from '../services/controller/pool-client.js';
import { registerSearchAttributes } from '../workers/search-attributes.js';
import { poolWorkflowId } from '../workflows/api.js';
import { temporalClient, workflowBundle } from './helpers/berth-worker.js';

/** A platform and workload the test controls: backends come up as soon as replicas are set. */
function fakeActivities() {
  const state = { replicas: new Map<string, number>(), patches: [] as [string, number][], waiting: 0, releasedLeases: 0, releaseGate: Promise.resolve() };
  const activities: HeavyPoolActivities = {
    async setReplicas({ group, replicas }) {
      const previous = state.replicas.get(group) ?? 0;
      if (previous === replicas) return { changed: false, previous };
      state.replicas.set(group, replicas);
      state.patches.push([group, replicas]);
      return { changed: true, previous };
    },
    async observePool({ group }) {
      const n = state.replicas.get(group) ?? 0;
      return { pods: n, backends: Array.from({ length: n }, (_, i) => ({ id: `${group}-${i}`, url: 'http://127.0.0.1:9' })) };
    },
    async canaryScan({ backends }) {
      return backends.map((b) => ({ id: b.id, ok: true }));
    },
    async releaseGroupLeases() {
      await state.releaseGate;
      state.releasedLeases++;
      return [];
    },
    async runHeavyQuery() {
      return { columns: [], types: [], rows: [], stats: {} };
    },
    async waitingQueries() {
      return state.waiting;
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
  const pool = (group: string, config: object = {}): PoolClientOptions => ({
    client,
    taskQueue,
    config: { group, increment: 1, maxReplicas: 3, readinessPollMs: 50, monitorPollMs: 100, monitorSustainMs: 500, idleTimeoutMs: 600_000, ...config },
  });

  beforeAll(async () => {
    client = await temporalClient();
    connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    await registerSearchAttributes(connection, 'default'); // as every Berth worker does before it polls
    worker = await Worker.create({ connection, taskQueue, workflowBundle: await workflowBundle(), activities: fake.activities });
    running = worker.run();
  });
  afterAll(async () => {
    worker.shutdown();
    await running;
    await connection.close();
    await client.connection.close();
  });

  it('raises the target by one increment when queries keep waiting, never past the maximum', async () => {
    const group = `monitor-${randomUUID().slice(0, 8)}`;
    await launchPool(pool(group), 1);
    await expect.poll(async () => (await poolStatus({ client, group })).serveReady, { timeout: 20_000 }).toBe(true);
    fake.state.waiting = 3; // sustained queueing
    await expect.poll(async () => (await poolStatus({ client, group })).replicasPatched, { timeout: 20_000 }).toBe(3);
    const status = await poolStatus({ client, group });
    expect(status.target).toBe(3);
    expect(fake.state.patches.filter(([g]) => g === group).map(([, n]) => n)).toEqual([1, 2, 3]); // one increment at a time, capped at 3
    fake.state.waiting = 0;
    await client.workflow.getHandle(poolWorkflowId(group)).terminate('test over');
  });

  it('parks after the idle timeout, and a launch arriving while it drains cancels the reap', async () => {
    const group = `reaper-${randomUUID().slice(0, 8)}`;
    let openGate: () => void = () => {};
    fake.state.releaseGate = new Promise<void>((resolve) => (openGate = resolve));
    // Long enough that the relaunched pool stays ready for a few status polls on a busy machine.
    const idle = { idleTimeoutMs: 3_000 };
    await launchPool(pool(group, idle), 1);
    await expect.poll(async () => (await poolStatus({ client, group })).phase, { timeout: 20_000 }).toBe('draining');
    await launchPool(pool(group, idle), 1); // arrives while the reaper drains
    openGate();
    await expect.poll(async () => (await poolStatus({ client, group })).phase, { timeout: 20_000 }).toBe('ready');
    expect(fake.state.replicas.get(group)).toBe(1); // never patched to zero

    // Left alone, the next idle timeout parks it for real.
    await expect.poll(async () => (await poolStatus({ client, group })).phase, { timeout: 20_000 }).toBe('parked');
    expect(fake.state.patches.filter(([g]) => g === group).map(([, n]) => n)).toEqual([1, 0]);
    await client.workflow.getHandle(poolWorkflowId(group)).terminate('test over');
  });

  it('continues as new while parked once its history grows, and loses no launch across it', async () => {
    const group = `long-${randomUUID().slice(0, 8)}`;
    await launchPool(pool(group, { idleTimeoutMs: 3_000, monitorPollMs: 20 }), 1); // frequent polls: a long history
    await expect.poll(async () => (await poolStatus({ client, group })).phase, { timeout: 20_000 }).toBe('parked');
    const runs = async () => {
      const ids: string[] = [];
      for await (const run of client.workflow.list({ query: `WorkflowId = '${poolWorkflowId(group)}'` })) ids.push(run.runId);
      return ids.length;
    };
    await expect.poll(runs, { timeout: 20_000 }).toBeGreaterThanOrEqual(2);
    const accepted = await launchPool(pool(group, { idleTimeoutMs: 3_000 }), 2);
    expect(accepted.accepted).toBe(2);
    await expect.poll(async () => (await poolStatus({ client, group })).serveReady, { timeout: 20_000 }).toBe(true);
    const status = await poolStatus({ client, group });
    expect(status).toMatchObject({ target: 2, replicasPatched: 2, patches: 3 }); // carried over: 0 → 1, 1 → 0, 0 → 2
    await client.workflow.getHandle(poolWorkflowId(group)).terminate('test over');
  });
});

/**
 * Schedules follow configuration: the built worker, restarted with another BERTH_MERGE_EVERY_MS,
 * updates the merge schedules it keeps; pointed at a meta that no longer lists a table, it deletes
 * that table's schedule; every schedule has a catch-up window.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { ScheduleNotFoundError, type Client } from '@temporalio/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mergeTaskQueueFor } from '../workflows/contracts/shared.js';
import { JANITOR_SCHEDULE_ID } from '../workflows/contracts/janitor.js';
import { RETENTION_SCHEDULE_ID } from '../workflows/contracts/retention.js';
import { mergeScheduleId } from '../workflows/contracts/segment-merge.js';
import { spawnWorkerProcess, temporalClient } from './helpers/berth-worker.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';

const HOUR = 3_600_000;

describe('schedules that follow configuration', () => {
  let withBoth: TestCluster;
  let withKeptOnly: TestCluster;
  let client: Client;
  let worker: { child: ChildProcess; exited: Promise<unknown> } | undefined;
  const taskQueue = `schedules-${randomUUID()}`;
  const suffix = randomBytes(4).toString('hex');
  const kept = `kept_${suffix}`;
  const dropped = `dropped_${suffix}`;
  const describeSchedule = (table: string) => client.schedule.getHandle(mergeScheduleId(table)).describe();
  const runWorker = (cluster: TestCluster, env: Record<string, string>) => {
    worker = spawnWorkerProcess(cluster, taskQueue, { BERTH_SCHEDULE_SYNC_MS: '300', ...env });
  };

  beforeAll(async () => {
    [withBoth, withKeptOnly] = await Promise.all([startCluster({ vcpus: [] }), startCluster({ vcpus: [] })]);
    await withBoth.ingestEvents(kept, 1, 10);
    await withBoth.ingestEvents(dropped, 1, 10);
    await withKeptOnly.ingestEvents(kept, 1, 10);
    client = await temporalClient();
  });
  afterEach(async () => {
    worker?.child.kill('SIGTERM');
    await worker?.exited;
    worker = undefined;
  });
  afterAll(async () => {
    for (const id of [mergeScheduleId(kept), mergeScheduleId(dropped), JANITOR_SCHEDULE_ID, RETENTION_SCHEDULE_ID]) {
      const handle = client.schedule.getHandle(id);
      // The janitor's and retention's schedules are shared by the namespace: remove it only if this test's worker owns it.
      if (
        await handle.describe().then(
          (d) => d.action.taskQueue === mergeTaskQueueFor(taskQueue),
          () => false,
        )
      )
        await handle.delete();
    }
    await client?.connection.close();
    await withBoth?.close();
    await withKeptOnly?.close();
  });

  it('creates a merge schedule per table, with a catch-up window of one interval', async () => {
    runWorker(withBoth, { BERTH_MERGE_EVERY_MS: String(HOUR), BERTH_RETENTION_EVERY_MS: String(3 * HOUR) });
    // One sync creates them one after the other (in meta's order, dropped_ first): wait for both.
    const exists = (table: string) =>
      describeSchedule(table).then(
        () => true,
        () => false,
      );
    await expect
      .poll(async () => [await exists(dropped), await exists(kept)], { timeout: 60_000 })
      .toEqual([true, true]);
    const schedule = await describeSchedule(kept);
    expect(schedule.spec.intervals?.map((i) => i.every)).toEqual([HOUR]);
    expect(schedule.policies).toMatchObject({ overlap: 'SKIP', catchupWindow: HOUR });
    expect(schedule.action).toMatchObject({
      taskQueue: mergeTaskQueueFor(taskQueue),
      workflowType: 'tableMergeWorkflow',
      args: [{ table: kept, minInputs: 10, maxInputs: 100 }],
    });
    // Retention's, one for every table, on its own interval.
    const retention = await client.schedule.getHandle(RETENTION_SCHEDULE_ID).describe();
    expect(retention.spec.intervals?.map((i) => i.every)).toEqual([3 * HOUR]);
    expect(retention.action).toMatchObject({
      taskQueue: mergeTaskQueueFor(taskQueue),
      workflowType: 'retentionWorkflow',
    });
  });

  it('updates the schedule when BERTH_MERGE_EVERY_MS and BERTH_MERGE_MIN_INPUTS change', async () => {
    runWorker(withBoth, { BERTH_MERGE_EVERY_MS: String(2 * HOUR), BERTH_MERGE_MIN_INPUTS: '4' });
    await expect
      .poll(async () => (await describeSchedule(kept)).spec.intervals?.map((i) => i.every), { timeout: 60_000 })
      .toEqual([2 * HOUR]);
    const schedule = await describeSchedule(kept);
    expect(schedule.policies.catchupWindow).toBe(2 * HOUR);
    expect(schedule.action).toMatchObject({ args: [{ table: kept, minInputs: 4, maxInputs: 100 }] });
  });

  it('deletes the schedule of a table meta no longer lists, and keeps the others', async () => {
    runWorker(withKeptOnly, { BERTH_MERGE_EVERY_MS: String(2 * HOUR), BERTH_MERGE_MIN_INPUTS: '4' });
    await expect
      .poll(
        () =>
          describeSchedule(dropped).then(
            () => 'still there',
            (error) => (error instanceof ScheduleNotFoundError ? 'deleted' : String(error)),
          ),
        { timeout: 60_000 },
      )
      .toBe('deleted');
    expect((await describeSchedule(kept)).spec.intervals?.map((i) => i.every)).toEqual([2 * HOUR]);
  });
});

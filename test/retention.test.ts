/**
 * Retention (issue 29, item 2): a table's retention period, set through the coordinator's
 * authenticated endpoint, and the workflow that retires every segment whose newest row is older,
 * then the janitor that deletes their objects. On a real Temporal dev server, real query nodes,
 * meta and the S3 API.
 */
import { randomUUID } from 'node:crypto';
import { HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRetentionActivities } from '../activities/retention.js';
import { segmentObjectKey } from '../core/identifiers.js';
import { createS3Client } from '../services/common/s3-client.js';
import type { MetaClient } from '../services/meta/client.js';
import { mergeTaskQueueFor } from '../workflows/contracts/shared.js';
import { janitorWorkflow, retentionWorkflow } from '../workflows/index.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';

const DAY = 86_400_000;
const DAYS = 40;
const KEPT_DAYS = 30;
const ROWS_PER_DAY = 24;

/**
 * Day d's rows, d days back: an hour that ends 11 h before the same time of day, so that no
 * segment straddles a cutoff taken within 11 h of `now` (a straddling one would be kept).
 */
function dayOf(now: number, d: number): string {
  const start = now - d * DAY - 12 * 3_600_000;
  return Array.from({ length: ROWS_PER_DAY }, (_, i) =>
    JSON.stringify({ ts: new Date(start + i * 150_000).toISOString(), day: d, user_id: i % 4 }),
  ).join('\n');
}

describe('retention', () => {
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  let s3: S3Client;
  const now = Date.now();
  const workerQueue = `retention-${randomUUID()}`;
  const taskQueue = mergeTaskQueueFor(workerQueue);
  const setRetention = (table: string, body: unknown, withToken = true) =>
    fetch(`${cluster.coordinator.url}/v1/tables/${table}/retention`, {
      method: body === undefined ? 'DELETE' : 'PUT',
      headers: {
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(withToken ? { authorization: `Bearer ${TOKEN}` } : {}),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const count = async (table: string, where = 'true') => {
    const { status, body } = await cluster.query(`SELECT count(*) FROM ${table} WHERE ${where}`);
    expect(status, body.message).toBe(200);
    return Number(body.rows[0]![0]);
  };

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2] });
    client = await temporalClient();
    worker = await startWorker(cluster, workerQueue);
    s3 = createS3Client(cluster.s3);
    for (const table of ['aged', 'kept'])
      for (let d = 0; d < DAYS; d++) {
        const { status, body } = await cluster.ingest(table, `${dayOf(now, d)}\n`);
        expect(status, body.message).toBe(200);
      }
  });
  afterAll(async () => {
    s3?.destroy();
    await worker?.stop();
    await client?.connection.close();
    await cluster?.close();
  });

  it('takes a period only with the token, for a table that exists, as a whole number of ms, and removes it', async () => {
    expect((await setRetention('aged', { retentionMs: KEPT_DAYS * DAY }, false)).status).toBe(401);
    expect((await setRetention('nowhere', { retentionMs: KEPT_DAYS * DAY })).status).toBe(404);
    for (const retentionMs of [0, -1, 1.5, '30d', null])
      expect((await setRetention('aged', { retentionMs })).status).toBe(400);
    expect((await setRetention('kept', { retentionMs: DAY })).status).toBe(200);
    expect((await setRetention('kept', undefined)).status).toBe(200);
    expect((await setRetention('aged', { retentionMs: KEPT_DAYS * DAY })).status).toBe(200);
    const retentions = await cluster.meta.retentions();
    expect(retentions.find((r) => r.table === 'aged')).toEqual({ table: 'aged', retentionMs: KEPT_DAYS * DAY });
    expect(retentions.find((r) => r.table === 'kept')).toBeUndefined();
  });

  it('retires every segment past the period, once, keeps the rest as they were, and the janitor deletes the objects', async () => {
    const cutoff = new Date(now - KEPT_DAYS * DAY).toISOString();
    const newer = await count('aged', `ts >= '${cutoff}'`);
    expect(newer).toBe(KEPT_DAYS * ROWS_PER_DAY);
    const doomed = (await cluster.meta.listSegments('aged')).filter((s) => s.maxTs < now - KEPT_DAYS * DAY);
    expect(doomed).toHaveLength(DAYS - KEPT_DAYS);

    const workflowId = `retention-${randomUUID()}`;
    const retired = await client.workflow.execute(retentionWorkflow, { taskQueue, workflowId });
    expect(retired).toMatchObject({
      segments: DAYS - KEPT_DAYS,
      rows: (DAYS - KEPT_DAYS) * ROWS_PER_DAY,
      bytes: doomed.reduce((sum, s) => sum + s.bytes, 0),
    });
    // What the Web UI shows on the run.
    const metadata = await client.workflow
      .getHandle(workflowId)
      .query<{ currentDetails: string }>('__temporal_workflow_metadata');
    expect(metadata.currentDetails).toContain(`retired ${DAYS - KEPT_DAYS} segments`);

    expect(await count('aged')).toBe(newer);
    expect(await count('aged', `ts < '${cutoff}'`)).toBe(0);
    expect(await count('aged', `ts >= '${cutoff}'`)).toBe(newer);
    // A table without a period keeps everything.
    expect(await count('kept')).toBe(DAYS * ROWS_PER_DAY);
    // Again: nothing is left to retire.
    expect(
      await client.workflow.execute(retentionWorkflow, { taskQueue, workflowId: `retention-${randomUUID()}` }),
    ).toMatchObject({ segments: 0 });

    // The objects stay for queries in flight until the janitor's grace has passed, then go.
    const exists = (id: string) =>
      s3.send(new HeadObjectCommand({ Bucket: cluster.bucket, Key: segmentObjectKey('aged', id) })).then(
        () => true,
        () => false,
      );
    expect(await exists(doomed[0]!.id)).toBe(true);
    const swept = await client.workflow.execute(janitorWorkflow, {
      taskQueue,
      workflowId: `janitor-${randomUUID()}`,
      args: [{ graceMs: 0 }],
    });
    expect(swept.retired.first).toEqual(expect.arrayContaining(doomed.map((s) => s.id)));
    for (const segment of doomed) expect(await exists(segment.id)).toBe(false);
    expect(await count('aged')).toBe(newer);
  });

  it('retires nothing twice and loses nothing when its worker dies after meta took a batch', async () => {
    // A table of its own; a worker that dies right after meta retired its first batch.
    for (let d = 0; d < DAYS; d++) expect((await cluster.ingest('crashed', `${dayOf(now, d)}\n`)).status).toBe(200);
    await cluster.meta.setRetention('crashed', KEPT_DAYS * DAY);
    const meta: Pick<MetaClient, 'retentions' | 'listSegments' | 'retireSegments'> = {
      retentions: async () => (await cluster.meta.retentions()).filter((r) => r.table === 'crashed'),
      listSegments: (table, range) => cluster.meta.listSegments(table, range),
      retireSegments: (ids) => cluster.meta.retireSegments(ids),
    };
    let calls = 0;
    const dying: typeof meta = {
      ...meta,
      retireSegments: async (ids) => {
        await cluster.meta.retireSegments(ids.slice(0, 3));
        calls++;
        throw new Error('worker killed');
      },
    };
    await expect(
      new MockActivityEnvironment().run(createRetentionActivities({ meta: dying }).retireExpiredSegments),
    ).rejects.toThrow('worker killed');
    expect(calls).toBe(1);
    const retry = await new MockActivityEnvironment().run(createRetentionActivities({ meta }).retireExpiredSegments);
    // The retry retires what the first attempt left, and only that.
    expect(retry).toMatchObject({ tables: 1, segments: DAYS - KEPT_DAYS - 3 });
    expect(await count('crashed')).toBe(KEPT_DAYS * ROWS_PER_DAY);
  });
});

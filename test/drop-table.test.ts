/**
 * Drop table (issue 29, item 3): the coordinator's authenticated drop hides the table from queries
 * and ingest at once; its workflow retires the segments, the janitor deletes their objects, and
 * the name then starts empty, its batches never taken for the dropped table's. On a real Temporal
 * dev server, real query nodes, meta and the S3 API.
 */
import { randomUUID } from 'node:crypto';
import { ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTableDropActivities } from '../activities/table-drop.js';
import { createS3Client } from '../services/common/s3-client.js';
import type { MetaClient } from '../services/meta/client.js';
import { mergeTaskQueueFor } from '../workflows/contracts/shared.js';
import { janitorWorkflow } from '../workflows/index.js';
import { startTableDrop } from '../workflows/table-drop-client.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';

const BATCHES = 5;
const ROWS = 7;

/** Batch b: ROWS rows on day b of November, so each batch is a segment of its own. */
const batch = (b: number) =>
  Array.from({ length: ROWS }, (_, i) =>
    JSON.stringify({ ts: `2026-11-${String(b + 1).padStart(2, '0')}T00:00:0${i}Z`, batch: b, user_id: i }),
  ).join('\n') + '\n';

describe('drop table', () => {
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  let s3: S3Client;
  const workerQueue = `drop-${randomUUID()}`;
  const taskQueue = mergeTaskQueueFor(workerQueue);
  const drop = (table: string, withToken = true) =>
    fetch(`${cluster.coordinator.url}/v1/tables/${table}`, {
      method: 'DELETE',
      headers: withToken ? { authorization: `Bearer ${TOKEN}` } : {},
    });
  const count = async (table: string) => {
    const { status, body } = await cluster.query(`SELECT count(*) FROM ${table}`);
    expect(status, body.message).toBe(200);
    return Number(body.rows[0]![0]);
  };
  const objectsOf = async (table: string) =>
    (await s3.send(new ListObjectsV2Command({ Bucket: cluster.bucket, Prefix: `tables/${table}/` }))).KeyCount ?? 0;

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2] });
    client = await temporalClient();
    worker = await startWorker(cluster, workerQueue);
    s3 = createS3Client(cluster.s3);
    for (const table of ['gone', 'kept'])
      for (let b = 0; b < BATCHES; b++) {
        const { status, body } = await cluster.ingest(table, batch(b));
        expect(status, body.message).toBe(200);
      }
  });
  afterAll(async () => {
    s3?.destroy();
    await worker?.stop();
    await client?.connection.close();
    await cluster?.close();
  });

  it('drops only with the token, and only a table that exists', async () => {
    expect((await drop('gone', false)).status).toBe(401);
    const missing = await drop('nowhere');
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { message: string }).message).toMatch(/table "nowhere" does not exist/);
    expect(await count('gone')).toBe(BATCHES * ROWS);
  });

  it('hides the table at once, retires its segments by its workflow, deletes every object, then starts the name empty', async () => {
    expect(await objectsOf('gone')).toBe(BATCHES);
    const dropped = await drop('gone');
    expect(dropped.status).toBe(200);
    expect(await dropped.json()).toMatchObject({
      table: 'gone',
      incarnation: 1,
      segments: BATCHES,
      rows: BATCHES * ROWS,
      workflowId: 'drop-gone-1',
    });

    // Gone from queries and listings at once; the other table is as it was, joins to it too.
    const asked = await cluster.query('SELECT count(*) FROM gone');
    expect(asked.status).toBe(400);
    expect(asked.body.message).toMatch(/unknown table "gone"/);
    expect((await cluster.meta.listTables()).map((t) => t.name)).toEqual(['kept']);
    expect(await count('kept')).toBe(BATCHES * ROWS);
    // Its name waits for the drop to finish: a batch now is refused, not mixed with the old rows.
    const early = await cluster.ingest('gone', batch(0));
    expect(early.status).toBe(409);
    expect(early.body.message).toMatch(/table "gone" is being dropped/);
    expect(await cluster.meta.drops()).toEqual([expect.objectContaining({ table: 'gone', incarnation: 1 })]);

    const run = await startTableDrop(client, { table: 'gone', incarnation: 1 }, taskQueue);
    expect(run.workflowId).toBe('drop-gone-1');
    expect(await run.result()).toEqual({
      segments: BATCHES,
      rows: BATCHES * ROWS,
      bytes: expect.any(Number) as number,
    });
    const metadata = await run.query<{ currentDetails: string }>('__temporal_workflow_metadata');
    expect(metadata.currentDetails).toContain(`dropped gone (incarnation 1): retired ${BATCHES} segments`);
    expect(await cluster.meta.drops()).toEqual([]);

    // The objects stay for queries in flight until the janitor's grace has passed, then go.
    expect(await objectsOf('gone')).toBe(BATCHES);
    await client.workflow.execute(janitorWorkflow, {
      taskQueue,
      workflowId: `janitor-${randomUUID()}`,
      args: [{ graceMs: 0 }],
    });
    expect(await objectsOf('gone')).toBe(0);
    expect(await objectsOf('kept')).toBe(BATCHES);

    // The name again: empty, and a batch the dropped table had is new to it (not deduplicated away).
    const again = await cluster.ingest('gone', batch(0));
    expect(again.status, again.body.message).toBe(200);
    expect((await cluster.meta.findTable('gone'))!.incarnation).toBe(2);
    expect(await count('gone')).toBe(ROWS);
    const { body } = await cluster.query('SELECT min(batch), max(batch) FROM gone');
    expect(body.rows).toEqual([[0, 0]]);
    expect(await count('kept')).toBe(BATCHES * ROWS);
  });

  it('retires nothing twice and loses nothing when its worker dies after meta took a batch', async () => {
    for (let b = 0; b < BATCHES; b++) expect((await cluster.ingest('crashed', batch(b))).status).toBe(200);
    const { incarnation } = (await cluster.meta.findTable('crashed'))!;
    await cluster.meta.dropTable('crashed', incarnation);
    let calls = 0;
    const dying: Pick<MetaClient, 'retireDropped'> = {
      retireDropped: async (table, dropped) => {
        await cluster.meta.retireDropped(table, dropped, 2);
        calls++;
        throw new Error('worker killed');
      },
    };
    const run = (meta: Pick<MetaClient, 'retireDropped'>) =>
      new MockActivityEnvironment().run(createTableDropActivities({ meta }).retireDroppedTable, {
        table: 'crashed',
        incarnation,
      });
    await expect(run(dying)).rejects.toThrow('worker killed');
    expect(calls).toBe(1);
    // The retry retires what the first attempt left, and only that.
    expect(await run(cluster.meta)).toMatchObject({ segments: BATCHES - 2, rows: (BATCHES - 2) * ROWS });
    expect(await cluster.meta.drops()).toEqual([]);
    const retired = (await cluster.meta.listRetired(Date.now() + 1)).filter((s) => s.table === 'crashed');
    expect(retired).toHaveLength(BATCHES);
    expect(await count('kept')).toBe(BATCHES * ROWS);
  });
});

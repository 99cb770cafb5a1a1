/**
 * Schema evolution (issue 29, item 1): a batch may bring fields its table lacks, and they become
 * new nullable columns; segments written before read them as NULL, warm, cold and after a merge,
 * exactly as one DuckDB answers over the same NDJSON files read with union_by_name. On real query
 * nodes, meta, the S3 API and a Temporal dev server for the merge.
 */
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { segmentObjectKey } from '../core/identifiers.js';
import { readJsonResult, type JsonResult } from '../services/common/final-stage/result-json.js';
import { createS3Client } from '../services/common/s3-client.js';
import { mergeTaskQueueFor } from '../workflows/contracts/shared.js';
import { mergeWorkflowId } from '../workflows/contracts/segment-merge.js';
import { segmentMergeWorkflow } from '../workflows/index.js';
import { expectSameResult } from './helpers/compare-results.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';
import { startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';

const PARTITION = '20261101';
const at = (minute: number) =>
  `2026-11-01T${String(Math.floor(minute / 60)).padStart(2, '0')}:${String(minute % 60).padStart(2, '0')}:00Z`;
const ndjson = (rows: object[]) => rows.map((row) => JSON.stringify(row)).join('\n') + '\n';

/** Three batches, each with a field the ones before lack; the third leaves the second's out. */
const BATCHES = [
  Array.from({ length: 30 }, (_, i) => ({ ts: at(i), a: i - 15 })),
  Array.from({ length: 30 }, (_, i) => ({ ts: at(30 + i), a: 100 + i, b: i % 4 === 0 ? null : `b${i % 3}` })),
  Array.from({ length: 30 }, (_, i) => ({ ts: at(60 + i), a: -100 - i, n: { x: i, tag: `t${i % 2}` } })),
];

/** What users ask of such a table: the new columns alone, beside the old, counted, grouped, filtered. */
const QUERIES = [
  { sql: 'SELECT a, b, n FROM evo ORDER BY a', ordered: true },
  { sql: 'SELECT b, count(*) AS rows, sum(a) AS total FROM evo GROUP BY b', ordered: false },
  {
    sql: 'SELECT count(b) AS with_b, count(n) AS with_n, count(*) FILTER (WHERE b IS NULL AND n IS NULL) AS neither FROM evo',
    ordered: true,
  },
  { sql: 'SELECT n.tag AS tag, sum(n.x) AS xs FROM evo WHERE n IS NOT NULL GROUP BY ALL', ordered: false },
  { sql: "SELECT a FROM evo WHERE b = 'b1' OR n.x > 25 ORDER BY a", ordered: true },
  { sql: 'SELECT * EXCLUDE (ts) FROM evo ORDER BY a LIMIT 5', ordered: true },
];

describe('schema evolution', () => {
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  let duckdb: DuckDBInstance;
  let s3: S3Client;
  const files: string[] = [];
  const workerQueue = `evolution-${randomUUID()}`;

  /** One DuckDB over the batches sent so far, as NDJSON files read by name. */
  async function reference(sql: string): Promise<JsonResult> {
    const c = await duckdb.connect();
    try {
      const list = files.map((f) => `'${f}'`).join(', ');
      // DuckDB's reader types a, negative in one file and not in another, HUGEINT; docs/types.md says BIGINT.
      await c.run(
        `CREATE OR REPLACE TEMP VIEW evo AS SELECT * REPLACE (CAST(a AS BIGINT) AS a) FROM read_json([${list}], union_by_name = true)`,
      );
      return await readJsonResult(await c.stream(sql));
    } finally {
      c.closeSync();
    }
  }

  async function expectAnswersAsDuckDB(when: string): Promise<void> {
    for (const q of QUERIES) {
      const { status, body } = await cluster.query(q.sql);
      expect(status, `${when}: ${q.sql}: ${body.message}`).toBe(200);
      expectSameResult(body, await reference(q.sql), q.ordered, `${when}: ${q.sql}`);
    }
  }

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2] });
    client = await temporalClient();
    worker = await startWorker(cluster, workerQueue);
    duckdb = await DuckDBInstance.create(':memory:');
    s3 = createS3Client(cluster.s3);
  });
  afterAll(async () => {
    s3?.destroy();
    duckdb?.closeSync();
    await worker?.stop();
    await client?.connection.close();
    await cluster?.close();
  });

  it('adds new fields as nullable columns that older segments read as NULL, warm, cold and after a merge', async () => {
    for (const [i, rows] of BATCHES.entries()) {
      const file = path.join(cluster.dir, `batch-${i}.ndjson`);
      await writeFile(file, ndjson(rows));
      files.push(file);
      const before = await cluster.query('SELECT * FROM evo ORDER BY ts');
      const { status, body } = await cluster.ingest('evo', ndjson(rows));
      expect(status, `batch ${i}: ${body.message}`).toBe(200);
      // A plan and an answer cached under the old schema are not served under the new one.
      const after = await cluster.query('SELECT * FROM evo ORDER BY ts');
      expect(after.status, after.body.message).toBe(200);
      expect(after.body.columns).toEqual(['ts', 'a', 'b', 'n'].slice(0, i + 2));
      if (i > 0) expect(before.body.columns).toEqual(['ts', 'a', 'b', 'n'].slice(0, i + 1));
      expect(after.body.rows).toHaveLength(30 * (i + 1));
    }
    expect((await cluster.meta.findTable('evo'))!.columns).toEqual([
      { name: 'ts', type: 'TIMESTAMP' },
      { name: 'a', type: 'BIGINT' },
      { name: 'b', type: 'VARCHAR' },
      { name: 'n', type: 'STRUCT(x BIGINT, tag VARCHAR)' },
    ]);
    await expectAnswersAsDuckDB('warm');

    // Cold: a new node with an empty cache owns every segment once the first one leaves.
    const [first] = cluster.nodes;
    const cold = await cluster.addNode();
    await first!.close();
    await cluster.awaitMembers([cold.id]);
    const { body: coldAnswer } = await cluster.query('SELECT a, b, n FROM evo ORDER BY a');
    expect(coldAnswer.stats).toMatchObject({ cacheHits: 0, cacheMisses: 3 });
    await expectAnswersAsDuckDB('cold');

    const merged = await client.workflow.execute(segmentMergeWorkflow, {
      taskQueue: mergeTaskQueueFor(workerQueue),
      workflowId: `${mergeWorkflowId('evo', PARTITION)}-${randomUUID()}`,
      args: [{ table: 'evo', partition: PARTITION }],
    });
    expect(merged).toMatchObject({ outcome: 'merged' });
    expect(await cluster.meta.listSegments('evo')).toHaveLength(1);
    await expectAnswersAsDuckDB('merged');
  });

  it('merges segments into one with the columns they hold, whatever the table gained since', async () => {
    const day = (d: number, minute: number) => `2026-11-0${d}T00:${String(minute).padStart(2, '0')}:00Z`;
    for (const rows of [[{ ts: day(1, 0), a: 1 }], [{ ts: day(1, 1), a: 2 }], [{ ts: day(2, 0), a: 3, z: 'new' }]])
      expect((await cluster.ingest('late', ndjson(rows))).status).toBe(200);
    const merged = await client.workflow.execute(segmentMergeWorkflow, {
      taskQueue: mergeTaskQueueFor(workerQueue),
      workflowId: `${mergeWorkflowId('late', PARTITION)}-${randomUUID()}`,
      args: [{ table: 'late', partition: PARTITION, minInputs: 2 }],
    });
    expect(merged).toMatchObject({ outcome: 'merged' });
    // Its bytes depend on its inputs alone: it holds ts and a, as they did, not the z added after.
    const object = await s3.send(
      new GetObjectCommand({ Bucket: cluster.bucket, Key: segmentObjectKey('late', merged.merged!.id) }),
    );
    const file = path.join(cluster.dir, 'late-merged.parquet');
    await writeFile(file, await object.Body!.transformToByteArray());
    const c = await duckdb.connect();
    try {
      expect(
        (await c.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet('${file}')`)).getRows().map((r) => r[0]),
      ).toEqual(['ts', 'a']);
    } finally {
      c.closeSync();
    }
    const { body } = await cluster.query('SELECT a, z FROM late ORDER BY a');
    expect(body.rows).toEqual([
      [1, null],
      [2, null],
      [3, 'new'],
    ]);
  });

  it('converges on one schema when batches that add the same and different fields arrive at once', async () => {
    expect((await cluster.ingest('grow', ndjson([{ ts: at(0), s: 0 }]))).status).toBe(200);
    // Batch i brings the shared field "shared" and one of its own, "f<i>", four rows each.
    const batches = Array.from({ length: 6 }, (_, i) =>
      Array.from({ length: 4 }, (_, r) => ({ ts: at(1 + i * 4 + r), s: i, shared: `v${i}`, [`f${i}`]: r })),
    );
    const answers = await Promise.all(batches.map((rows) => cluster.ingest('grow', ndjson(rows))));
    for (const { status, body } of answers) expect(status, body.message).toBe(200);
    const columns = (await cluster.meta.findTable('grow'))!.columns;
    expect(columns.slice(0, 2)).toEqual([
      { name: 'ts', type: 'TIMESTAMP' },
      { name: 's', type: 'BIGINT' },
    ]);
    expect(columns.slice(2).sort((x, y) => x.name.localeCompare(y.name))).toEqual([
      ...batches.map((_, i) => ({ name: `f${i}`, type: 'BIGINT' })),
      { name: 'shared', type: 'VARCHAR' },
    ]);
    const sums = batches.map((_, i) => `sum(f${i}) FILTER (WHERE s = ${i}) AS f${i}, count(f${i}) AS n${i}`).join(', ');
    const { body } = await cluster.query(`SELECT count(*) AS rows, count(shared) AS shared, ${sums} FROM grow`);
    expect(body.rows).toEqual([[25, 24, ...batches.flatMap(() => [6, 4])]]);
  });

  it('refuses a batch whose new field clashes with a column, naming the field, and adds nothing', async () => {
    const columns = (await cluster.meta.findTable('evo'))!.columns;
    const caseOnly = await cluster.ingest('evo', ndjson([{ ts: at(5), A: 1, fresh: 1 }]));
    expect(caseOnly.status).toBe(400);
    expect(caseOnly.body.message).toMatch(/field "A" differs from the table's column "a" only in case/);
    const misfit = await cluster.ingest('evo', ndjson([{ ts: at(5), b: 7, fresh: 1 }]));
    expect(misfit.status).toBe(400);
    expect(misfit.body.message).toMatch(/line 1: field "b"/);
    expect((await cluster.meta.findTable('evo'))!.columns).toEqual(columns);
  });
});

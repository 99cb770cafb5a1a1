/**
 * Attaching Parquet already in a bucket (issue 30, item 2): 200 objects DuckDB wrote into a second
 * bucket of the run's SeaweedFS become segments without a byte copied, answer exactly as one DuckDB
 * over the same files, are cached by their owners, and one overwritten afterwards is refused with
 * a message until it is attached again. Merges take attached objects only when they were attached
 * to be adopted, and neither they nor dropping the table ever delete an object Berth did not
 * write. On a real cluster.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CreateBucketCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { DuckDBInstance } from '@duckdb/node-api';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createJanitorActivities } from '../activities/janitor.js';
import { createMergeActivities } from '../activities/merge.js';
import { readJsonResult, type JsonResult } from '../services/common/final-stage/result-json.js';
import { createS3Client } from '../services/common/s3-client.js';
import type { AttachRequest, AttachResult } from '../services/coordinator/api.js';
import type { SegmentRow } from '../services/meta/client.js';
import type { JanitorSweep } from '../workflows/contracts/janitor.js';
import { expectSameResult } from './helpers/compare-results.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { eventRowsSql } from './helpers/event-data.js';
import { mergeDeps } from './helpers/merge-deps.js';

const OBJECTS = 200;
const ROWS = 60;
const QUERIES = [
  { sql: 'SELECT count(*) AS n, count(DISTINCT user_id) AS users, sum(bytes) AS bytes FROM logs', ordered: true },
  { sql: 'SELECT service, level, count(*) AS n, avg(latency_ms) AS latency FROM logs GROUP BY ALL', ordered: false },
  {
    sql: "SELECT ts, service, status FROM logs WHERE ts >= TIMESTAMP '2026-11-01 20:00:00' AND ts < TIMESTAMP '2026-11-01 21:00:00' ORDER BY ts",
    ordered: true,
  },
  { sql: 'SELECT region, max(ts) AS last FROM logs GROUP BY region', ordered: false },
];

describe('attaching Parquet already in a bucket', () => {
  let cluster: TestCluster;
  let s3: S3Client;
  let dir: string;
  let duckdb: DuckDBInstance;
  const bucket = `attached-${randomUUID().slice(0, 8)}`;
  const files: string[] = [];
  const keyOf = (i: number) => `logs/2026/part-${String(i).padStart(4, '0')}.parquet`;

  const attach = async (
    request: Omit<AttachRequest, 'bucket'>,
  ): Promise<{ status: number; body: AttachResult & { message?: string } }> => {
    const response = await fetch(`${cluster.coordinator.url}/v1/tables/logs/attach`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ bucket, ...request }),
    });
    return { status: response.status, body: (await response.json()) as AttachResult & { message?: string } };
  };
  /** Every page of an attach, summed. */
  const attachAll = async (request: Omit<AttachRequest, 'bucket'>) => {
    const total = { attached: 0, unchanged: 0, replaced: 0, rows: 0, refused: [] as AttachResult['refused'], pages: 0 };
    let startAfter: string | undefined;
    do {
      const { status, body } = await attach({ ...request, ...(startAfter ? { startAfter } : {}) });
      expect(status, body.message).toBe(200);
      total.attached += body.attached;
      total.unchanged += body.unchanged;
      total.replaced += body.replaced;
      total.rows += body.rows;
      total.refused.push(...body.refused);
      total.pages++;
      startAfter = body.next;
    } while (startAfter);
    return total;
  };
  const reference = async (sql: string): Promise<JsonResult> => {
    const c = await duckdb.connect();
    try {
      await c.run(
        `CREATE OR REPLACE TEMP VIEW logs AS SELECT * FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}])`,
      );
      return await readJsonResult(await c.stream(sql));
    } finally {
      c.closeSync();
    }
  };
  const writeObject = async (i: number, sql: string) => {
    const c = await duckdb.connect();
    try {
      await c.run(`COPY (${sql}) TO '${files[i]}' (FORMAT parquet)`);
    } finally {
      c.closeSync();
    }
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: keyOf(i), Body: await readFile(files[i]!) }));
  };
  const keysIn = async (b: string, prefix: string) =>
    ((await s3.send(new ListObjectsV2Command({ Bucket: b, Prefix: prefix }))).Contents ?? []).map((o) => o.Key!);

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2, 1] });
    s3 = createS3Client(cluster.s3);
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-attach-'));
    duckdb = await DuckDBInstance.create(':memory:');
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    for (let i = 0; i < OBJECTS; i++) {
      files.push(path.join(dir, `part-${i}.parquet`));
      // Written in no order of time: the manifest's ranges come from each file's own statistics.
      const first = ((i * 37) % OBJECTS) * ROWS;
      await writeObject(i, eventRowsSql(first, first + ROWS));
    }
    // Beside them, what a prefix holds in life: a file that is not Parquet at all.
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'logs/2026/broken.parquet', Body: 'not parquet' }));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'logs/2026/_SUCCESS', Body: '' }));
  });
  afterAll(async () => {
    duckdb?.closeSync();
    s3?.destroy();
    await cluster?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('attaches every object under a prefix, page by page, and refuses what is not Parquet', async () => {
    for (const node of cluster.nodes) node.warmer.stop();
    const result = await attachAll({ prefix: 'logs/2026/', limit: 64 });
    expect(result).toMatchObject({ attached: OBJECTS, unchanged: 0, replaced: 0, rows: OBJECTS * ROWS });
    expect(result.pages).toBe(Math.ceil((OBJECTS + 1) / 64));
    expect(result.refused).toEqual([
      { key: 'logs/2026/broken.parquet', reason: expect.stringMatching(/is not a Parquet file/) },
    ]);
    const segments = await cluster.meta.listSegments('logs');
    expect(segments).toHaveLength(OBJECTS);
    expect(segments.reduce((sum, s) => sum + s.rows, 0)).toBe(OBJECTS * ROWS);
    expect(new Set(segments.map((s) => s.object?.key))).toEqual(new Set(files.map((_, i) => keyOf(i))));
    // Nothing was copied: Berth's bucket holds no object of the table.
    expect(await keysIn(cluster.bucket, 'tables/logs/')).toEqual([]);
    // Again: nothing changes.
    expect(await attachAll({ prefix: 'logs/2026/' })).toMatchObject({ attached: 0, unchanged: OBJECTS });
    const metrics = await (await fetch(`${cluster.coordinator.url}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`^berth_ingest_rows_total\\{path="attach"\\} ${OBJECTS * ROWS}$`, 'm'));
    // The object that is not Parquet, refused by each of the two calls that met it.
    expect(metrics).toMatch(/^berth_ingest_failed_requests_total\{path="attach",kind="invalid"\} 2$/m);
  });

  it('refuses an object overwritten since it was attached, until it is attached again', async () => {
    // No node has read any object yet (the warmers are stopped): the next read of each is from S3.
    const changed = 7;
    await writeObject(changed, `${eventRowsSql(0, 5)} UNION ALL ${eventRowsSql(0, 5)}`);
    const { status, body } = await cluster.query('SELECT count(*) FROM logs');
    expect(status).toBe(409);
    expect(body.message).toContain(`s3://${bucket}/${keyOf(changed)}`);
    expect(body.message).toMatch(/has changed since it was attached .* attach it again/);

    expect(await attachAll({ prefix: 'logs/2026/' })).toMatchObject({
      attached: 0,
      replaced: 1,
      unchanged: OBJECTS - 1,
    });
    const { body: again } = await cluster.query('SELECT count(*) FROM logs');
    expect(again.rows).toEqual([[(OBJECTS - 1) * ROWS + 10]]);
  });

  it('answers as one DuckDB over the same files, prunes by the statistics’ times, and caches each on its owner', async () => {
    for (const q of QUERIES) {
      const { status, body } = await cluster.query(q.sql);
      expect(status, `${q.sql}: ${body.message}`).toBe(200);
      expectSameResult(body, await reference(q.sql), q.ordered, q.sql);
    }
    const { body } = await cluster.query(QUERIES[2]!.sql);
    expect(body.stats.segments.scanned).toBeLessThan(OBJECTS / 10);
    const placement = cluster.coordinator.view.placement!;
    for (const segment of await cluster.meta.listSegments('logs')) {
      const owner = cluster.nodes.find((n) => n.id === placement.owner(segment.id)!.id)!;
      expect(owner.cache.has(segment.id), segment.id).toBe(true);
      for (const other of cluster.nodes.filter((n) => n !== owner)) expect(other.cache.has(segment.id)).toBe(false);
    }
  });

  it('merges objects attached to be adopted into Berth’s own bucket, and no others', async () => {
    const adopted: string[] = [];
    for (let i = 0; i < 4; i++) {
      adopted.push(path.join(dir, `adopt-${i}.parquet`));
      const c = await duckdb.connect();
      await c.run(`COPY (${eventRowsSql(i * ROWS, (i + 1) * ROWS)}) TO '${adopted[i]}' (FORMAT parquet)`);
      c.closeSync();
      await s3.send(
        new PutObjectCommand({ Bucket: bucket, Key: `adopt/part-${i}.parquet`, Body: await readFile(adopted[i]!) }),
      );
    }
    const response = await fetch(`${cluster.coordinator.url}/v1/tables/adopted/attach`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ bucket, prefix: 'adopt/', adopt: true }),
    });
    expect(await response.json()).toMatchObject({ attached: 4 });

    const deps = await mergeDeps(cluster);
    try {
      const merge = createMergeActivities(deps);
      const pick = (table: string): Promise<SegmentRow[]> =>
        new MockActivityEnvironment().run(merge.pickMergeInputs, {
          table,
          partition: '20261101',
          level: 0,
          maxInputs: 100,
        });
      expect(await pick('logs')).toEqual([]); // attached without --adopt: never merged
      const inputs = (await pick('adopted')).map((s) => s.id);
      expect(inputs).toHaveLength(4);
      await new MockActivityEnvironment().run(merge.mergePushAndCommit, {
        table: 'adopted',
        partition: '20261101',
        level: 0,
        inputs,
      });
    } finally {
      deps.close();
    }
    const [merged, ...others] = await cluster.meta.listSegments('adopted');
    expect(others).toEqual([]);
    expect(merged).toMatchObject({ level: 1, rows: 4 * ROWS });
    expect(merged!.object).toBeUndefined();
    expect(await keysIn(cluster.bucket, 'tables/adopted/')).toEqual([`tables/adopted/${merged!.id}.parquet`]);
    expect(await keysIn(bucket, 'adopt/')).toHaveLength(4); // the objects themselves stay
    const c = await duckdb.connect();
    const expected = await readJsonResult(
      await c.stream(
        `SELECT count(*), sum(bytes), max(ts) FROM read_parquet([${adopted.map((f) => `'${f}'`).join(', ')}])`,
      ),
    );
    c.closeSync();
    const { body } = await cluster.query('SELECT count(*), sum(bytes), max(ts) FROM adopted');
    expectSameResult(body, expected, true, 'the adopted table after its merge');
  });

  it('takes objects by glob or by key, and never deletes one when the table goes', async () => {
    const glob = await attach({ glob: 'logs/2026/part-01[0-4]?.parquet' });
    expect(glob.body).toMatchObject({ attached: 0, unchanged: 50 });
    const keys = await attach({ keys: [keyOf(3), 'logs/2026/missing.parquet'] });
    expect(keys.status).toBe(400);
    expect(keys.body.message).toMatch(/s3:\/\/.*missing\.parquet cannot be read/);

    const before = await keysIn(bucket, 'logs/');
    const dropped = await fetch(`${cluster.coordinator.url}/v1/tables/logs`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(dropped.status).toBe(200);
    const { incarnation } = (await dropped.json()) as { incarnation: number };
    while ((await cluster.meta.retireDropped('logs', incarnation, 1_000)).more);
    const janitor = createJanitorActivities({ s3, bucket: cluster.bucket, meta: cluster.meta });
    const forgotten: JanitorSweep = await new MockActivityEnvironment().run(janitor.deleteRetiredSegments, {
      graceMs: 0,
    });
    expect(forgotten.deleted).toBeGreaterThanOrEqual(OBJECTS);
    expect(await keysIn(bucket, 'logs/')).toEqual(before);
  });
});

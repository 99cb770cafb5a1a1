/**
 * Cold scans end to end: query nodes that hold nothing fetch each segment's footer, then only the
 * column chunks their query reads, and answer exactly as one DuckDB over the whole objects; a
 * later query that reads another column fetches that column's chunks alone.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { segmentObjectKey } from '../core/identifiers.js';
import { createS3Client } from '../services/common/s3-client.js';
import { toJsonResult } from '../services/common/final-stage/result-json.js';
import { QUERY_CORPUS } from './fixtures/query-corpus.js';
import { expectSameResult } from './helpers/compare-results.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';

const BATCHES = 6;
const ROWS_PER_BATCH = 20_000;

describe('cold scans', () => {
  let cluster: TestCluster;
  let reference: DuckDBInstance;
  let objectBytes = 0;
  /** Bytes of each column's chunks over every segment, from the objects' footers. */
  const columnBytes = new Map<string, number>();

  const expected = async (sql: string) => {
    const c = await reference.connect();
    try {
      return toJsonResult(await c.runAndReadAll(sql));
    } finally {
      c.closeSync();
    }
  };

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2, 2] });
    await cluster.ingestEvents('events', BATCHES, ROWS_PER_BATCH);
    const s3 = createS3Client(cluster.s3);
    const dir = path.join(cluster.dir, 'reference');
    await mkdir(dir);
    const files: string[] = [];
    for (const segment of await cluster.meta.listSegments('events')) {
      const object = await s3.send(
        new GetObjectCommand({ Bucket: cluster.bucket, Key: segmentObjectKey('events', segment.id) }),
      );
      const bytes = await object.Body!.transformToByteArray();
      const file = path.join(dir, `${segment.id}.parquet`);
      await writeFile(file, bytes);
      files.push(file);
      objectBytes += bytes.length;
    }
    s3.destroy();
    reference = await DuckDBInstance.create(':memory:');
    const c = await reference.connect();
    const list = `[${files.map((f) => `'${f}'`).join(', ')}]`;
    await c.run(`CREATE VIEW events AS SELECT * FROM read_parquet(${list})`);
    for (const [column, bytes] of (
      await c.runAndReadAll(
        `SELECT path_in_schema, sum(total_compressed_size) FROM parquet_metadata(${list}) GROUP BY 1`,
      )
    ).getRowsJson()) {
      columnBytes.set(String(column), Number(bytes));
    }
    c.closeSync();
    // Ingest pushed every segment to its owner: replace the nodes with two that hold nothing.
    const warm = [...cluster.nodes];
    const cold = [await cluster.addNode(), await cluster.addNode()];
    for (const node of warm) await node.close();
    cluster.nodes.splice(0, warm.length);
    await cluster.awaitMembers(cold.map((n) => n.id));
  });
  afterAll(async () => {
    reference?.closeSync();
    await cluster?.close();
  });

  it('fetches footers, then only the chunks of the columns the query reads', async () => {
    const sql = 'SELECT service, count(*) AS n, sum(bytes) AS total FROM events GROUP BY service ORDER BY service';
    const { status, body } = await cluster.query(sql);
    expect(status, body.message).toBe(200);
    expectSameResult(body, await expected(sql), true, 'cold aggregate');
    expect(body.stats.cacheMisses).toBe(BATCHES);
    const needed = columnBytes.get('service')! + columnBytes.get('bytes')!;
    expect(body.stats.bytesFromS3).toBeGreaterThanOrEqual(needed);
    // Beyond those chunks, per segment: its last 64 KiB with the footer (twice that from a server
    // without suffix ranges), and the bytes outside any column chunk (magic, bloom filters).
    expect(body.stats.bytesFromS3 - needed).toBeLessThanOrEqual(BATCHES * 3 * 64 * 1024);
    expect(body.stats.bytesFromS3).toBeLessThan(objectBytes);
  });

  it('fetches a column read for the first time, and nothing else', async () => {
    // The first column's chunks lie at the start of each object, far from the tail fetched with the footer.
    const sql = 'SELECT service, min(ts) AS first, sum(bytes) AS total FROM events GROUP BY service ORDER BY service';
    const { status, body } = await cluster.query(sql);
    expect(status, body.message).toBe(200);
    expectSameResult(body, await expected(sql), true, 'one more column');
    expect(body.stats.bytesFromS3).toBe(columnBytes.get('ts'));
    const again = await cluster.query(sql);
    expect(again.body.stats.bytesFromS3).toBe(0);
    expect(again.body.stats.cacheHits).toBe(BATCHES);
  });

  it.each(QUERY_CORPUS)(
    'answers "$name" exactly as one DuckDB, from segments held in part',
    async ({ name, sql, ordered }) => {
      const { status, body } = await cluster.query(sql);
      expect(status, body.message).toBe(200);
      expectSameResult(body, await expected(sql), ordered, name);
    },
  );
});

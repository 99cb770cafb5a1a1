/**
 * What a cold query costs S3, counted: on query nodes that hold nothing of a table, the first
 * query moves the chunks of the columns it reads and little else (the footers, the bytes between
 * chunks), a warm one moves nothing, and what `stats.s3BytesByNode` says each node read agrees
 * with each node's own counters (`berth_s3_bytes_total`, `berth_segment_reads_total`).
 *
 * The segments are PUT and committed as ingest would, with no push, so no node has them; they are
 * large enough (several MB, two row groups) that a footer is small next to a column's chunks, and
 * of hard-to-compress rows, as bench/scan's.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { segmentId, segmentObjectKey } from '../core/identifiers.js';
import { sqlString, withConnection } from '../services/common/duckdb.js';
import { toJsonResult } from '../services/common/final-stage/result-json.js';
import { createS3Client } from '../services/common/s3-client.js';
import { expectSameResult } from './helpers/compare-results.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';

const SEGMENTS = 4;
const ROWS_PER_SEGMENT = 150_000;
/** At most this many times the chunks of the columns a cold query reads may move from S3. */
const MOST_MOVED_PER_CHUNK_BYTE = 1.1;
/** bench/scan's aggregate: `sum(bytes) AS bytes` names its result as a column of the table. */
const AGGREGATE =
  'SELECT service, count(*) AS n, sum(bytes) AS bytes, avg(latency_ms) AS latency, max(latency_ms) AS worst FROM events GROUP BY service ORDER BY service';
const AGGREGATE_COLUMNS = ['service', 'latency_ms', 'bytes'];
/** Two columns more than AGGREGATE. */
const WIDER =
  'SELECT service, status, count(*) AS n, sum(bytes) AS bytes, min(ts) AS ts FROM events GROUP BY service, status ORDER BY service, status';
const WIDER_ONLY = ['status', 'ts'];

/** A counter's value per label set on a Prometheus text page. */
function counter(page: string, name: string, labels = ''): number {
  const line = page.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('bytes a cold query moves from S3', () => {
  let cluster: TestCluster;
  let reference: DuckDBInstance;
  /** Bytes of each column's chunks over every segment, from the files' footers. */
  const chunkBytes = new Map<string, number>();
  const bytesOf = (columns: string[]) => columns.reduce((sum, c) => sum + chunkBytes.get(c)!, 0);

  /** Each node's S3 bytes and segment reads by role and cache, as its /metrics page says now. */
  async function nodeCounters() {
    const counters = new Map<string, { s3Bytes: number; reads: Record<string, number> }>();
    for (const node of cluster.nodes) {
      const page = await (await fetch(`${node.url}/metrics`)).text();
      const reads = (role: string, cache: string) =>
        counter(page, 'berth_segment_reads_total', `{role="${role}",cache="${cache}"}`);
      counters.set(node.id, {
        s3Bytes: counter(page, 'berth_s3_bytes_total'),
        reads: {
          'owner-hit': reads('owner', 'hit'),
          'owner-miss': reads('owner', 'miss'),
          'fallback-hit': reads('fallback', 'hit'),
          'fallback-miss': reads('fallback', 'miss'),
        },
      });
    }
    return counters;
  }

  /** Runs `sql`, checks its answer against one DuckDB and that each node's counters moved as the stats say. */
  async function query(sql: string, cache: 'hit' | 'miss') {
    const before = await nodeCounters();
    const { status, body } = await cluster.query(sql);
    expect(status, body.message).toBe(200);
    const c = await reference.connect();
    try {
      expectSameResult(body, toJsonResult(await c.runAndReadAll(sql)), true, sql);
    } finally {
      c.closeSync();
    }
    const after = await nodeCounters();
    for (const node of cluster.nodes) {
      const [was, now] = [before.get(node.id)!, after.get(node.id)!];
      expect(now.s3Bytes - was.s3Bytes, `S3 bytes of ${node.id}`).toBe(body.stats.s3BytesByNode[node.id] ?? 0);
      const read = body.stats.nodes[node.id] ?? 0;
      expect(
        Object.fromEntries(Object.entries(now.reads).map(([k, v]) => [k, v - was.reads[k]!])),
        `segment reads of ${node.id}`,
      ).toEqual({
        'owner-hit': cache === 'hit' ? read : 0,
        'owner-miss': cache === 'miss' ? read : 0,
        'fallback-hit': 0,
        'fallback-miss': 0,
      });
    }
    return body.stats;
  }

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [] });
    // No warmer pass during the test: it would fetch whole segments behind the queries' backs.
    for (let i = 0; i < 2; i++) await cluster.addNode({ vcpus: 2, warmIntervalMs: 3_600_000 });
    await cluster.awaitMembers(cluster.nodes.map((n) => n.id));
    const s3 = createS3Client(cluster.s3);
    reference = await DuckDBInstance.create(':memory:');
    const files: string[] = [];
    const columns = [
      { name: 'ts', type: 'TIMESTAMP' },
      { name: 'service', type: 'VARCHAR' },
      { name: 'status', type: 'INTEGER' },
      { name: 'latency_ms', type: 'DOUBLE' },
      { name: 'bytes', type: 'BIGINT' },
      { name: 'request_id', type: 'VARCHAR' },
      { name: 'user_id', type: 'VARCHAR' },
    ];
    await cluster.meta.ensureTable({ name: 'events', timestampColumn: 'ts', columns });
    const day = Date.UTC(2026, 9, 1);
    for (let s = 0; s < SEGMENTS; s++) {
      const file = path.join(cluster.dir, `segment-${s}.parquet`);
      const [from, to] = [s * ROWS_PER_SEGMENT, (s + 1) * ROWS_PER_SEGMENT];
      await withConnection(reference, (c) =>
        c.run(`COPY (SELECT TIMESTAMP '2026-10-01' + to_milliseconds(i * 50) AS ts,
            ['api','web','auth','search','billing','mail','cdn'][1 + (hash(i) % 7)::INT] AS service,
            (hash(i * 3) % 600)::INTEGER AS status, (hash(i * 11) % 1000000) / 1000.0 AS latency_ms,
            (hash(i * 5) % 10000000)::BIGINT AS bytes, md5(i::VARCHAR) AS request_id,
            md5((i * 7)::VARCHAR)[1:16] AS user_id
          FROM range(${from}, ${to}) t(i) ORDER BY ts) TO ${sqlString(file)} (FORMAT parquet)`),
      );
      const body = await readFile(file);
      const id = segmentId('events', 0, '20261001', createHash('sha256').update(body).digest('hex').slice(0, 20));
      await s3.send(new PutObjectCommand({ Bucket: cluster.bucket, Key: segmentObjectKey('events', id), Body: body }));
      await cluster.meta.commitSegment({
        id,
        table: 'events',
        minTs: day + from * 50,
        maxTs: day + (to - 1) * 50,
        rows: ROWS_PER_SEGMENT,
        bytes: body.length,
        level: 0,
      });
      files.push(file);
    }
    s3.destroy();
    const list = `[${files.map(sqlString).join(', ')}]`;
    await withConnection(reference, async (c) => {
      await c.run(`CREATE VIEW events AS SELECT * FROM read_parquet(${list})`);
      const sums = await c.runAndReadAll(
        `SELECT path_in_schema, sum(total_compressed_size) FROM parquet_metadata(${list}) GROUP BY 1`,
      );
      for (const [column, bytes] of sums.getRowsJson()) chunkBytes.set(String(column), Number(bytes));
    });
  });
  afterAll(async () => {
    reference?.closeSync();
    await cluster?.close();
  });

  it('moves the chunks of the columns a cold first query reads, and at most a tenth more', async () => {
    const stats = await query(AGGREGATE, 'miss');
    expect(stats.cacheMisses).toBe(SEGMENTS);
    expect(stats.stages.scan[0]!.columns).toEqual(AGGREGATE_COLUMNS);
    const chunks = bytesOf(AGGREGATE_COLUMNS);
    expect(stats.bytesFromS3).toBeGreaterThanOrEqual(chunks);
    expect(stats.bytesFromS3).toBeLessThanOrEqual(MOST_MOVED_PER_CHUNK_BYTE * chunks);
  });

  it('moves nothing when the same query runs warm', async () => {
    const stats = await query(AGGREGATE, 'hit');
    expect(stats.cacheHits).toBe(SEGMENTS);
    expect(stats.bytesFromS3).toBe(0);
  });

  it('moves only the chunks of the columns a later query reads for the first time', async () => {
    const stats = await query(WIDER, 'miss');
    const chunks = bytesOf(WIDER_ONLY);
    expect(stats.bytesFromS3).toBeGreaterThanOrEqual(chunks);
    expect(stats.bytesFromS3).toBeLessThanOrEqual(MOST_MOVED_PER_CHUNK_BYTE * chunks);
    expect((await query(WIDER, 'hit')).bytesFromS3).toBe(0);
  });
});

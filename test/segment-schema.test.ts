/**
 * The file and the table never disagree where a query can see it: a query node refuses to scan a
 * segment whose file holds a column the scan reads as another type than its table declares, and
 * the coordinator's exchange refuses a stream of other types than its plan's. Either is a 500 that
 * names what disagrees, never rows, and never routed around to another node.
 */
import { mkdtemp, rename, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { DuckDBInstance } from '@duckdb/node-api';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installErrorHandler } from '../services/common/errors.js';
import { SegmentSchemaMismatch, SegmentSchemas } from '../services/query-node/segment-schema.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';

/** Rewrites a Parquet file in place with column `x` as DOUBLE, as a file that disagrees with a BIGINT column would be. */
async function rewriteAsDouble(duckdb: DuckDBInstance, file: string): Promise<void> {
  const c = await duckdb.connect();
  try {
    await c.run(
      `COPY (SELECT * REPLACE (CAST(x AS DOUBLE) AS x) FROM read_parquet('${file}')) TO '${file}.rewritten' (FORMAT parquet)`,
    );
  } finally {
    c.closeSync();
  }
  await rename(`${file}.rewritten`, file);
}

describe('segment schemas', () => {
  let dir: string;
  let duckdb: DuckDBInstance;
  const declared = [
    { name: 'ts', type: 'TIMESTAMP' },
    { name: 'x', type: 'BIGINT' },
    { name: 'label', type: 'VARCHAR' },
  ];

  /** A segment's file whose column `x` is DOUBLE where the table declares BIGINT. */
  async function writeSegment(id: string): Promise<string> {
    const file = path.join(dir, `${id}.parquet`);
    const c = await duckdb.connect();
    try {
      await c.run(
        `COPY (SELECT TIMESTAMP '2026-11-01' AS ts, i::DOUBLE AS x, 'l' || i AS label FROM range(10) t(i)) TO '${file}' (FORMAT parquet)`,
      );
    } finally {
      c.closeSync();
    }
    return file;
  }

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-segment-schema-'));
    duckdb = await DuckDBInstance.create(':memory:');
  });
  afterAll(async () => {
    duckdb?.closeSync();
    await rm(dir, { recursive: true, force: true });
  });

  it('passes a segment whose columns the scan reads have their declared types, whatever the others hold', async () => {
    const file = await writeSegment('seg-1');
    const schemas = new SegmentSchemas(duckdb);
    const whole = { columns: JSON.stringify(['ts', 'x', 'label']), lacking: [] };
    await expect(schemas.check('seg-1', { file }, [declared[0]!, declared[2]!])).resolves.toEqual(whole);
    await expect(schemas.check('seg-1', { file }, [{ name: 'LABEL', type: 'VARCHAR' }])).resolves.toEqual(whole);
  });

  it('names the columns a segment lacks, added to its table after it was written, to be read as NULL', async () => {
    const file = await writeSegment('seg-5');
    const schemas = new SegmentSchemas(duckdb);
    const added = [
      { name: 'y', type: 'BIGINT' },
      { name: 'Z', type: 'VARCHAR' },
    ];
    await expect(schemas.check('seg-5', { file }, [declared[0]!, ...added, declared[2]!])).resolves.toEqual({
      columns: JSON.stringify(['ts', 'x', 'label']),
      lacking: ['y', 'Z'],
    });
  });

  it('refuses a column of another type, naming the segment, the column and both types', async () => {
    const file = await writeSegment('seg-2');
    const schemas = new SegmentSchemas(duckdb);
    const refused = await schemas.check('seg-2', { file }, declared).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SegmentSchemaMismatch);
    expect(refused).toMatchObject({
      kind: 'inconsistent',
      code: 'segment_schema_mismatch',
      segment: 'seg-2',
      column: 'x',
      declared: 'BIGINT',
      found: 'DOUBLE',
    });
    expect((refused as Error).message).toBe(
      'segment seg-2 disagrees with its table: column "x" is declared BIGINT but the segment holds DOUBLE; the scan is refused rather than read as BIGINT',
    );
  });

  it('reads a segment’s schema once: a warm check reads nothing, whatever columns it asks for', async () => {
    const file = await writeSegment('seg-3');
    const schemas = new SegmentSchemas(duckdb);
    await schemas.check('seg-3', { file }, [declared[0]!]);
    await rm(file); // a segment id names one immutable object: its file is not read again
    await expect(schemas.check('seg-3', { file }, [declared[2]!])).resolves.toMatchObject({ lacking: [] });
    await expect(schemas.check('seg-3', { file }, declared)).rejects.toThrow(SegmentSchemaMismatch);
  });

  it('reads a file it could not read again the next time', async () => {
    const schemas = new SegmentSchemas(duckdb);
    const file = path.join(dir, 'seg-4.parquet');
    await expect(schemas.check('seg-4', { file }, declared)).rejects.toThrow(
      'reading the schema of segment seg-4 failed',
    );
    await writeSegment('seg-4');
    await expect(schemas.check('seg-4', { file }, declared)).rejects.toThrow(SegmentSchemaMismatch);
  });

  it('is answered as a 500 that says what disagrees, and logged as an error with the segment, column and types', async () => {
    const lines: string[] = [];
    const log = new Writable({
      write(line: Buffer, _encoding, done) {
        lines.push(line.toString());
        done();
      },
    });
    const app = Fastify({ logger: { stream: log } });
    installErrorHandler(app);
    // As the scan route is: logged only when it fails.
    app.post('/v1/scan', { logLevel: 'warn' }, async () => {
      throw new SegmentSchemaMismatch('seg-6', 'x', 'BIGINT', 'DOUBLE');
    });
    try {
      const response = await app.inject({ method: 'POST', url: '/v1/scan' });
      expect(response.statusCode).toBe(500);
      expect(response.json()).toEqual({ error: 'segment_schema_mismatch', message: expect.stringContaining('seg-6') });
      const logged = lines.map((line) => JSON.parse(line) as { level: number; err?: Record<string, unknown> });
      expect(logged).toContainEqual(
        expect.objectContaining({
          level: 50,
          err: expect.objectContaining({ segment: 'seg-6', column: 'x', declared: 'BIGINT', found: 'DOUBLE' }),
        }),
      );
    } finally {
      await app.close();
    }
  });

  it('checks a segment held in the memory tier by its table', async () => {
    const c = await duckdb.connect();
    await c.run('CREATE SCHEMA held');
    await c.run('CREATE TABLE held."seg-5" (ts TIMESTAMP, x HUGEINT, label VARCHAR)');
    c.closeSync();
    const schemas = new SegmentSchemas(duckdb);
    await expect(schemas.check('seg-5', { table: 'held."seg-5"' }, declared)).rejects.toMatchObject({
      column: 'x',
      declared: 'BIGINT',
      found: 'HUGEINT',
    });
  });
});

describe('a segment whose file disagrees with its table, in a cluster', () => {
  let cluster: TestCluster;
  let duckdb: DuckDBInstance;
  const rows = (n: number) =>
    Array.from({ length: n }, (_, i) =>
      JSON.stringify({ ts: '2026-11-01 00:00:00', x: i * 7, label: `l${i % 3}` }),
    ).join('\n');

  /** Ingests one batch into `table` (x BIGINT): its segment, and the file of it in its owner's cache. */
  async function ingestOne(table: string): Promise<{ segment: string; file: string }> {
    const { status, body } = await cluster.ingest(table, rows(200));
    expect(status, body.message).toBe(200);
    expect((await cluster.meta.findTable(table))?.columns).toContainEqual({ name: 'x', type: 'BIGINT' });
    const owner = cluster.nodes.find((n) => n.id === body.push.owner)!;
    expect(owner.cache.holdsWhole(body.segment.id)).toBe(true);
    return { segment: body.segment.id, file: path.join(owner.cacheDir, 'segments', `${body.segment.id}.parquet`) };
  }

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2, 2] });
    duckdb = await DuckDBInstance.create(':memory:');
  });
  afterAll(async () => {
    duckdb?.closeSync();
    await cluster?.close();
  });

  it('answers a 500 naming the segment, the column and both types, not rows, though another node could read it', async () => {
    const { segment, file } = await ingestOne('readings');
    await rewriteAsDouble(duckdb, file);
    for (const sql of ['SELECT sum(x) AS total FROM readings', 'SELECT x FROM readings ORDER BY x']) {
      const { status, body } = await cluster.query(sql);
      expect(status, sql).toBe(500);
      expect(body.error).toBe('segment_schema_mismatch');
      expect(body.message).toBe(
        `segment ${segment} disagrees with its table: column "x" is declared BIGINT but the segment holds DOUBLE; the scan is refused rather than read as BIGINT`,
      );
      expect(body.rows).toBeUndefined();
    }
    // A scan that reads none of the columns that disagree reads the segment.
    const { status, body } = await cluster.query('SELECT count(*), min(label) FROM readings');
    expect(status, body.message).toBe(200);
    expect(body.rows).toEqual([[200, 'l0']]);
  });

  it('refuses in the coordinator’s exchange a segment whose file changed after its node had checked it', async () => {
    const { file } = await ingestOne('later_readings');
    const before = await cluster.query('SELECT sum(x) AS total FROM later_readings');
    expect(before.status, before.body.message).toBe(200);
    expect(before.body.rows).toEqual([[(199 * 200 * 7) / 2]]);
    // Segments are immutable, so the node remembers what it checked: the exchange is what stops this one.
    await rewriteAsDouble(duckdb, file);
    const { status, body } = await cluster.query('SELECT x FROM later_readings');
    expect(status).toBe(500);
    expect(body.error).toBe('exchange_schema_mismatch');
    expect(body.message).toBe(
      'the scan stage sent column "x" as DOUBLE where BIGINT was expected; the query is refused rather than misread',
    );
    expect(body.rows).toBeUndefined();
  });
});

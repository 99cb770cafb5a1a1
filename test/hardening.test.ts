/**
 * The serving path against an attacker and a careless user: SQL that tries to read past the
 * catalog, queries that fail at run time, rows that do not fit, names that break ids, and rows
 * nested to crash the JSON reader. Each is answered with a 4xx that says what was wrong, and the
 * count and sums of the data already ingested never change.
 */
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createS3Client } from '../services/common/s3-client.js';
import { SegmentWriter } from '../services/coordinator/ingest/segment-writer.js';
import { SqlEngine } from '../services/coordinator/sql-engine.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe('hardening of the serving path', () => {
  let cluster: TestCluster;
  let baseline: unknown;
  /**
   * Count and sums over everything ingested: no bad input may change them. Latencies are summed as
   * the cents they hold: a sum of doubles moves in its last bits with the order DuckDB adds them
   * in (a node's segments read from its files, then from its memory tier, are added in two ways).
   */
  const totals = async () =>
    (
      await cluster.query(
        'SELECT count(*), sum(bytes), sum(status), sum(latency_ms::DECIMAL(18, 2))::VARCHAR FROM events',
      )
    ).body.rows;
  const expectDataUnchanged = async () => expect(await totals()).toEqual(baseline);

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2, 2] });
    await cluster.ingestEvents('events', 4, 500);
    baseline = await totals();
    expect(baseline).toEqual([[2_000, expect.anything(), expect.anything(), expect.anything()]]);
  });
  afterAll(async () => {
    await cluster?.close();
  });

  describe('SQL reads only the catalog’s tables', () => {
    it('refuses a CTE named like a file, declared in a subquery and read outside it, before anything runs', async () => {
      const node = cluster.nodes[0]!;
      const segment = node.cache.ids()[0]!;
      const file = path.join(node.cacheDir, 'segments', `${segment}.parquet`);
      const { status, body } = await cluster.query(
        `SELECT * FROM (WITH "${file}" AS (SELECT 1 AS x) SELECT x FROM "${file}") AS inner_query, "${file}" LIMIT 1`,
      );
      expect(status).toBe(400);
      expect(body.message).toBe(`unknown table "${file}"`);
      await expectDataUnchanged();
    });

    it('still lets a CTE hide a table inside its own scope', async () => {
      const { status, body } = await cluster.query(
        "WITH events AS (SELECT * FROM events WHERE level = 'error') SELECT count(*) = count_if(level = 'error') FROM events",
      );
      expect(status, body.message).toBe(200);
      expect(body.rows).toEqual([[true]]);
    });

    it.each([
      ['a pg_catalog view', 'SELECT * FROM pg_catalog.pg_tables', /not allowed: pg_catalog\.pg_tables/],
      ['a catalog view by its bare name', 'SELECT * FROM pg_tables', /unknown table "pg_tables"/],
      ['information_schema', 'SELECT * FROM information_schema.tables', /not allowed: information_schema\.tables/],
      ['a table function', 'SELECT * FROM duckdb_settings()', /not allowed: table function duckdb_settings/],
      ['a file path', "SELECT * FROM '/etc/passwd'", /unknown table "\/etc\/passwd"/],
      [
        'a setting that names directories',
        "SELECT current_setting('temp_directory')",
        /not allowed: function current_setting/,
      ],
      ['a NUL in the SQL', 'SELECT 1 \u0000', /NUL/],
    ])('refuses %s with a 400 that names it', async (_label, sql, message) => {
      const { status, body } = await cluster.query(sql);
      expect(status).toBe(400);
      expect(body.message).toMatch(message);
    });

    it('keeps ingest batches out of every directory a query’s DuckDB can read', async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-layout-'));
      // The coordinator's layout: the query engine's scratch and the ingest writer's, side by side.
      const engine = await SqlEngine.open(path.join(dir, 'scratch'));
      const writer = await SegmentWriter.open(path.join(dir, 'ingest'));
      try {
        const batch = writer.scratchFile('.ndjson');
        await writeFile(batch, '{"ts": "2026-11-01 00:00:00", "secret": "another client\'s row"}\n');
        const exchange = await engine.openExchange([]);
        await expect(exchange.finish(`SELECT * FROM read_json('${batch}')`)).rejects.toThrow(/Permission Error/);
        await exchange.close();
      } finally {
        engine.close();
        writer.close();
        await rm(dir, { recursive: true, force: true });
      }
    });
  });

  describe('query errors', () => {
    const scansRun = async () => {
      let total = 0;
      for (const node of cluster.nodes) {
        const metrics = await (await fetch(`${node.url}/metrics`)).text();
        for (const match of metrics.matchAll(/^berth_scans_total\{[^}]*\} (\d+)$/gm)) total += Number(match[1]);
      }
      return total;
    };

    it('answers a DuckDB error at run time with a 400 that quotes DuckDB, never retried on another node', async () => {
      const before = await scansRun();
      const { status, body } = await cluster.query('SELECT count(DISTINCT CAST(service AS INTEGER)) FROM events');
      expect(status).toBe(400);
      expect(body.message).toMatch(/^Conversion Error: Could not convert string '\w+' to INT32/);
      // Each owner got its share once (they scan side by side): the error was the answer, not a reason to fall back.
      const ran = (await scansRun()) - before;
      expect(ran).toBeGreaterThanOrEqual(1);
      expect(ran).toBeLessThanOrEqual(cluster.nodes.length);
      await expectDataUnchanged();
    });

    it('answers a two-stage query that ends in a comment', async () => {
      const { status, body } = await cluster.query('SELECT median(latency_ms) AS m FROM events -- the median');
      expect(status, body.message).toBe(200);
      expect(body.stats.route).toBe('rows');
    });
  });

  describe('ingest', () => {
    const row = (fields: Record<string, unknown>) =>
      JSON.stringify({
        ts: '2026-11-01 00:00:00',
        service: 'api',
        level: 'info',
        status: 200,
        latency_ms: 1.5,
        bytes: 10,
        user_id: 'u1',
        region: 'eu',
        ...fields,
      });

    it.each([1_000, 100_000])('refuses a row nested %i deep in under a second, and stays up', async (depth) => {
      const started = performance.now();
      const { status, body } = await cluster.ingest(
        'events',
        `${row({})}\n{"ts": "2026-11-01 00:00:00", "deep": ${'['.repeat(depth)}${']'.repeat(depth)}}\n`,
      );
      expect(status).toBe(400);
      expect(body.message).toBe('line 2: nested deeper than 64 levels (BERTH_INGEST_MAX_DEPTH)');
      expect(performance.now() - started).toBeLessThan(1_000);
      await expectDataUnchanged();
    });

    it.each([
      ['a fraction into an integer column', { status: 2.7 }, 'line 3: field "status": expected BIGINT, got 2.7'],
      ['a number as a string', { status: '201' }, 'line 3: field "status": expected BIGINT, got "201"'],
      [
        'a new field that differs from a column only in case',
        { Service: 'api' },
        'line 3: field "Service" differs from the table\'s column "service" only in case',
      ],
      [
        'a number into a VARCHAR column',
        { service: 42 },
        'line 3: field "service": expected VARCHAR (as a JSON string), got 42',
      ],
      [
        'an integer past 2^63',
        { bytes: '__BIG__' },
        'line 3: field "bytes": 9223372036854775808 is out of BIGINT\'s range',
      ],
      ['a field named __proto__', { ['__proto__']: 1 }, 'line 3: a field may not be named __proto__'],
    ])('refuses %s with the line and the field', async (_label, fields, message) => {
      const bad = row(fields).replace('"__BIG__"', '9223372036854775808');
      const { status, body } = await cluster.ingest('events', `${row({})}\n${row({ bytes: 20 })}\n${bad}\n`);
      expect(status).toBe(400);
      expect(body.message).toContain(message);
      await expectDataUnchanged();
    });

    it('takes rows that fit exactly, widening only what loses nothing', async () => {
      const ok = await cluster.ingest('widened', `${JSON.stringify({ ts: '2026-11-01 00:00:00', n: 1, d: 1.5 })}\n`);
      expect(ok.status, ok.body.message).toBe(200);
      const widened = await cluster.ingest(
        'widened',
        `${JSON.stringify({ ts: '2026-11-01 00:00:01', n: 2.0, d: 3 })}\n`,
      );
      expect(widened.status, widened.body.message).toBe(200);
      const { body } = await cluster.query('SELECT sum(n), sum(d), typeof(sum(d)) FROM widened');
      expect(body.rows).toEqual([[3, 4.5, 'DOUBLE']]);
    });

    it('refuses a table name whose segment ids would be invalid before any side effect', async () => {
      const { status } = await cluster.ingest('_ok_name', `${row({})}\n`);
      expect(status).toBe(400);
      expect((await cluster.meta.listTables()).map((t) => t.name)).not.toContain('_ok_name');
      const s3 = createS3Client(cluster.s3);
      const objects = await s3.send(new ListObjectsV2Command({ Bucket: cluster.bucket, Prefix: 'tables/_ok_name/' }));
      s3.destroy();
      expect(objects.KeyCount ?? 0).toBe(0);
      await expectDataUnchanged();
    });

    it.each([
      ['a 201-character column name', { [`c${'x'.repeat(200)}`]: 1 }, /longer than 200 characters/],
      [
        '2,001 columns',
        Object.fromEntries(Array.from({ length: 2_001 }, (_, i) => [`c${i}`, i])),
        /at most 2000 columns/,
      ],
    ])('refuses a new table with %s as a 400', async (_label, fields, message) => {
      const { status, body } = await cluster.ingest(
        'wide',
        `${JSON.stringify({ ts: '2026-11-01 00:00:00', ...fields })}\n`,
      );
      expect(status).toBe(400);
      expect(body.message).toMatch(message);
    });

    it('refuses a struct field named __proto__ in a new table with a 400', async () => {
      const { status, body } = await cluster.ingest(
        'protos',
        '{"ts": "2026-11-01 00:00:00", "s": {"__proto__": 1, "a": 2}}\n',
      );
      expect(status).toBe(400);
      expect(body.message).toBe('line 1: field "s".__proto__: a field may not be named __proto__');
    });

    it.each([
      ['an empty body', '', 'no_rows', 'the body holds no rows'],
      ['blank lines only', '\n \n\n', 'no_rows', 'the body holds no rows'],
      ['a JSON array', '[1,2]', 'row_does_not_fit', 'line 1: not a JSON object'],
      [
        'a gzip body sent as NDJSON',
        gzipSync(`${row({})}\n`),
        'compressed_body',
        'the body is gzip-compressed: send the NDJSON rows uncompressed',
      ],
      [
        'a timestamp past the year 9999',
        '{"ts": "294247-01-01"}\n',
        'row_does_not_fit',
        'field "ts": "294247-01-01" is not a timestamp: the timestamp column takes ISO 8601 strings such as "2026-11-01T00:00:00Z"',
      ],
      [
        'a key given twice',
        '{"ts": "2026-11-01 00:00:00", "a": 1, "a": 2}\n',
        'invalid_rows',
        /^the rows could not be read: .*the body/,
      ],
    ])('refuses %s in its own words, naming no path of the coordinator', async (_label, body, error, message) => {
      const answer = await cluster.ingest('fresh_table', body as string);
      expect(answer.status, answer.body.message).toBe(400);
      expect((answer.body as { error?: string }).error).toBe(error);
      expect(answer.body.message).toMatch(typeof message === 'string' ? new RegExp(`^${escape(message)}$`) : message);
      expect(answer.body.message).not.toContain(cluster.dir);
      // eslint-disable-next-line no-control-regex -- no control byte may reach the message
      expect(answer.body.message).not.toMatch(/[\u0000-\u0008\u000e-\u001f]/);
      // Nothing was made: not even the table.
      await expect(cluster.meta.listSegments('fresh_table')).rejects.toMatchObject({ status: 404 });
    });

    it('leaves no batch behind in the coordinator’s ingest directory', async () => {
      const left = (await readdir(path.join(cluster.dir, 'coordinator', 'ingest'))).filter((f) => f !== 'spill');
      expect(left).toEqual([]);
    });
  });
});

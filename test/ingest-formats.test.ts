/**
 * Files of every common format (issue 30, item 1): the same rows sent as Parquet, as CSV and as
 * gzipped NDJSON become three tables that answer identically, each exactly as one DuckDB over its
 * original file; later batches are held to the table's columns (widened where nothing is lost,
 * new columns added), and bad input is a 4xx that says what was wrong. On a real cluster.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readJsonResult, type JsonResult } from '../services/common/final-stage/result-json.js';
import type { IngestResult } from '../services/coordinator/client.js';
import { ALREADY_COMMITTED } from '../services/coordinator/ingest/ingest.js';
import { expectSameResult } from './helpers/compare-results.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';

/** Rows of every kind a log carries: times, signed integers, doubles, strings with NULLs, flags, dates. */
const ROWS_SQL = `SELECT
    TIMESTAMP '2026-11-01' + to_seconds(i * 37) AS ts,
    ['api', 'web', 'auth', 'search'][1 + (hash(i) % 4)::INT] AS service,
    (hash(i * 7) % 2000001)::BIGINT - 1000000 AS delta,
    round((hash(i * 3) % 100000) / 100.0 + 0.25, 2)::DOUBLE AS latency,
    CASE WHEN i % 7 = 0 THEN NULL ELSE 'u, "' || (i % 50)::VARCHAR || '"' END AS user_id,
    i % 3 = 0 AS ok,
    DATE '2026-01-01' + (i % 300)::INT AS day
  FROM range(20000) t(i)`;

const QUERIES = [
  { sql: 'SELECT * FROM t ORDER BY ts', ordered: true },
  {
    sql: 'SELECT service, count(*) AS n, sum(delta) AS delta, avg(latency) AS latency, count(user_id) AS users, bool_and(ok) AS ok, min(day) AS first, max(ts) AS last FROM t GROUP BY ALL',
    ordered: false,
  },
  { sql: "SELECT user_id, count(*) AS n FROM t WHERE ts >= '2026-11-01 03:00:00' GROUP BY ALL", ordered: false },
  { sql: 'SELECT day, min(delta) AS lo, max(delta) AS hi FROM t GROUP BY day ORDER BY day LIMIT 20', ordered: true },
];

describe('ingest of NDJSON, CSV and Parquet files', () => {
  let cluster: TestCluster;
  let dir: string;
  let duckdb: DuckDBInstance;
  const files = { parquet: '', csv: '', ndjson: '' };
  /** How one DuckDB reads each original file. */
  const readers = {
    parquet: () => `read_parquet('${files.parquet}')`,
    csv: () => `read_csv('${files.csv}', sample_size = -1)`,
    // DuckDB's JSON reader types integers of both signs HUGEINT; the NDJSON rule says BIGINT (docs/types.md).
    ndjson: () => `(SELECT * REPLACE (delta::BIGINT AS delta) FROM read_json('${files.ndjson}'))`,
  };

  const post = async (table: string, body: Buffer | string, headers: Record<string, string>, query = '') => {
    const response = await fetch(`${cluster.coordinator.url}/v1/tables/${table}/rows${query}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, ...headers },
      body,
    });
    return { status: response.status, body: (await response.json()) as IngestResult & { message: string } };
  };
  const parquet = (table: string, body: Buffer) =>
    post(table, body, { 'content-type': 'application/vnd.apache.parquet' });
  const reference = async (sql: string, relation: string): Promise<JsonResult> => {
    const c = await duckdb.connect();
    try {
      await c.run(`CREATE OR REPLACE TEMP VIEW t AS SELECT * FROM ${relation}`);
      return await readJsonResult(await c.stream(sql));
    } finally {
      c.closeSync();
    }
  };
  /** Writes `sql`'s rows to a Parquet file and answers its bytes. */
  const parquetOf = async (name: string, sql: string) => {
    const file = path.join(dir, `${name}.parquet`);
    const c = await duckdb.connect();
    try {
      await c.run(`COPY (${sql}) TO '${file}' (FORMAT parquet)`);
    } finally {
      c.closeSync();
    }
    return await readFile(file);
  };

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2, 1] });
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-formats-'));
    duckdb = await DuckDBInstance.create(':memory:');
    const c = await duckdb.connect();
    try {
      await c.run("SET TimeZone = 'UTC'");
      await c.run(`CREATE TABLE rows AS ${ROWS_SQL}`);
      files.parquet = path.join(dir, 'rows.parquet');
      files.csv = path.join(dir, 'rows.csv');
      files.ndjson = path.join(dir, 'rows.ndjson.gz');
      await c.run(`COPY rows TO '${files.parquet}' (FORMAT parquet)`);
      await c.run(`COPY rows TO '${files.csv}' (FORMAT csv, HEADER)`);
      await c.run(`COPY rows TO '${files.ndjson}' (FORMAT json, COMPRESSION gzip)`);
    } finally {
      c.closeSync();
    }
  });
  afterAll(async () => {
    duckdb?.closeSync();
    await cluster?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('makes three tables of the same rows that answer identically, each as one DuckDB over its file', async () => {
    expect((await parquet('from_parquet', await readFile(files.parquet))).status).toBe(200);
    expect((await post('from_csv', await readFile(files.csv), { 'content-type': 'text/csv' })).status).toBe(200);
    const gzipped = await post('from_ndjson', await readFile(files.ndjson), {
      'content-type': 'application/x-ndjson',
      'content-encoding': 'gzip',
    });
    expect(gzipped.status, gzipped.body.message).toBe(200);
    expect(gzipped.body.segment.rows).toBe(20_000);
    // Each way in is counted on its own: rows committed, bytes received (decompressed).
    const metrics = await (await fetch(`${cluster.coordinator.url}/metrics`)).text();
    for (const path of ['parquet', 'csv', 'ndjson'])
      expect(metrics).toMatch(new RegExp(`^berth_ingest_rows_total\\{path="${path}"\\} 20000$`, 'm'));
    expect(metrics).toMatch(/^berth_ingest_bytes_total\{path="csv"\} [1-9]\d{5,}$/m);

    for (const q of QUERIES) {
      const answers = [];
      for (const format of ['parquet', 'csv', 'ndjson'] as const) {
        const { status, body } = await cluster.query(q.sql.replace(/\bt\b/, `from_${format}`));
        expect(status, `${format}: ${q.sql}: ${body.message}`).toBe(200);
        expectSameResult(body, await reference(q.sql, readers[format]()), q.ordered, `${format}: ${q.sql}`);
        answers.push(body);
      }
      expectSameResult(answers[1]!, answers[0]!, q.ordered, `CSV as Parquet: ${q.sql}`);
      expectSameResult(answers[2]!, answers[0]!, q.ordered, `NDJSON as Parquet: ${q.sql}`);
    }
  });

  it('keeps a Parquet batch’s own types, and a batch sent again commits once', async () => {
    const sql = `SELECT TIMESTAMP_MS '2026-11-01 00:00:01.5' + to_minutes(i) AS ts, i::TINYINT AS tiny, i::UINTEGER AS unsigned,
        (i * 1.25)::DECIMAL(9,2) AS price, i::FLOAT AS f, uuid() AS id, {'k': i, 'tags': ['a', 'b'][1:i % 3]} AS nested,
        (['x', 'y'][1 + i % 2])::ENUM('x', 'y') AS choice
      FROM range(50) t(i)`;
    const bytes = await parquetOf('typed', sql);
    const first = await parquet('typed', bytes);
    expect(first.status, first.body.message).toBe(200);
    const again = await parquet('typed', bytes);
    expect(again.body).toMatchObject({ segment: { id: first.body.segment.id }, push: { reason: ALREADY_COMMITTED } });
    // TIMESTAMP_MS and ENUM are held as TIMESTAMP and VARCHAR, the types a segment keeps them as.
    const { body } = await cluster.query('SELECT * FROM typed ORDER BY ts');
    expect(body.types).toEqual([
      'TIMESTAMP',
      'TINYINT',
      'UINTEGER',
      'DECIMAL(9,2)',
      'FLOAT',
      'UUID',
      expect.stringMatching(/^STRUCT/),
      'VARCHAR',
    ]);
    const held = `(SELECT * REPLACE (ts::TIMESTAMP AS ts, choice::VARCHAR AS choice) FROM read_parquet('${path.join(dir, 'typed.parquet')}'))`;
    expectSameResult(body, await reference('SELECT * FROM t ORDER BY ts', held), true, 'typed');
  });

  it('holds later batches to the table: widens without loss, adds new columns, refuses the rest by name', async () => {
    const base = await parquetOf(
      'base',
      "SELECT TIMESTAMP '2026-11-01' + to_minutes(i) AS ts, i::BIGINT AS n, (i * 0.5)::DOUBLE AS x, 'a' AS s FROM range(10) t(i)",
    );
    expect((await parquet('held', base)).status).toBe(200);
    // INTEGER into BIGINT and DECIMAL into DOUBLE lose nothing; a new column is added.
    const wider = await parquetOf(
      'wider',
      "SELECT TIMESTAMP '2026-11-02' AS ts, 7::INTEGER AS n, 2.25::DECIMAL(4,2) AS x, 'b' AS s, true AS extra",
    );
    const widened = await parquet('held', wider);
    expect(widened.status, widened.body.message).toBe(200);
    const { body } = await cluster.query("SELECT n, x, s, extra FROM held WHERE ts >= DATE '2026-11-02'");
    expect(body).toMatchObject({ types: ['BIGINT', 'DOUBLE', 'VARCHAR', 'BOOLEAN'], rows: [[7, 2.25, 'b', true]] });

    const refusals: [string, string, RegExp][] = [
      [
        "SELECT TIMESTAMP '2026-11-03' AS ts, 'seven' AS n",
        'type_mismatch',
        /column "n" is VARCHAR in the batch; the table's column is BIGINT/,
      ],
      [
        "SELECT TIMESTAMP '2026-11-03' AS ts, 0.1::DECIMAL(30,29) * 3 AS x",
        'value_not_kept',
        /column "x" \(DECIMAL\(38,29\)\) holds "0.30000000000000000000000000000", which DOUBLE does not keep/,
      ],
      [
        "SELECT TIMESTAMP '2026-11-03' AS ts, 1 AS N",
        'column_case',
        /column "N" differs from the table's column "n" only in case/,
      ],
      ["SELECT DATE '2026-11-03' AS ts, 1 AS n", 'type_mismatch', /column "ts" is DATE in the batch/],
      ['SELECT 1 AS n', 'missing_timestamp', /the batch has no "ts" column/],
      [
        "SELECT TIMESTAMP '2026-11-03' AS ts, union_value(k := 1) AS u",
        'type_not_storable',
        /column "u" is STRUCT\("" UTINYINT, "k" INTEGER\), a struct with a field without a name/,
      ],
    ];
    for (const [sql, code, message] of refusals) {
      const refused = await parquet('held', await parquetOf('refused', sql));
      expect(refused.status, sql).toBe(400);
      expect(refused.body, sql).toMatchObject({ error: code });
      expect(refused.body.message, sql).toMatch(message);
    }
    const { body: all } = await cluster.query('SELECT count(*) FROM held');
    expect(all.rows).toEqual([[11]]);
  });

  it('reads CSV with the options given, held to the table’s types, naming the value or line at fault', async () => {
    const tsv =
      'ts\tcode\tnote\n2026-11-01 00:00:00\t007\ta;b\n2026-11-01 00:01:00\t042\t\n2026-11-01 00:01:30\t#9\tkept\n';
    expect((await post('codes', tsv, { 'content-type': 'text/tab-separated-values' })).status).toBe(200);
    const semicolons = "ts;code;note\n2026-11-01 00:02:00;'x;y';'it''s'\n";
    const read = await post('codes', semicolons, { 'content-type': 'text/csv' }, "?delimiter=;&quote='&escape='");
    expect(read.status, read.body.message).toBe(200);
    const { body } = await cluster.query('SELECT code, note FROM codes ORDER BY ts');
    // Leading zeros keep "code" a string, for DuckDB and so for the table.
    expect(body).toMatchObject({
      types: ['VARCHAR', 'VARCHAR'],
      rows: [
        ['007', 'a;b'],
        ['042', null],
        ['#9', 'kept'],
        ['x;y', "it's"],
      ],
    });

    const bad = await post('held_csv', 'ts,n\n2026-11-01 00:00:00,1\n', { 'content-type': 'text/csv' });
    expect(bad.status).toBe(200);
    const refused = await post('held_csv', 'ts,n\n2026-11-01 00:00:00,2\n2026-11-01 00:00:01,2.5\n', {
      'content-type': 'text/csv',
    });
    expect(refused.status).toBe(400);
    expect(refused.body.message).toMatch(/column "n" \(DOUBLE\) holds "2.5", which BIGINT does not keep as it is/);
    const ragged = await post(
      'held_csv',
      'ts,n\n2026-11-01 00:00:00,2\n2026-11-01 00:00:01,3,4\n',
      { 'content-type': 'text/csv' },
      '?delimiter=,',
    );
    expect(ragged.status).toBe(400);
    expect(ragged.body.message).toMatch(
      /the CSV body could not be read: .*not possible to .*detect the CSV parsing dialect/,
    );
    expect(ragged.body.message).not.toMatch(/\.csv|\/tmp\//);
  });

  it('answers a 4xx for a body it cannot take, and commits nothing of it', async () => {
    const garbage = await parquet('bad', Buffer.from('PAR1 not really a parquet file'));
    expect(garbage.status).toBe(400);
    expect(garbage.body.message).toMatch(/the Parquet body could not be read/);
    const notGzip = await post('bad', '{"ts": "2026-11-01T00:00:00Z"}\n', {
      'content-type': 'application/x-ndjson',
      'content-encoding': 'gzip',
    });
    expect(notGzip.status).toBe(400);
    expect(notGzip.body.message).toMatch(/not valid gzip/);
    const brotli = await post('bad', 'x', { 'content-type': 'application/x-ndjson', 'content-encoding': 'br' });
    expect(brotli.status).toBe(415);
    const xml = await post('bad', '<rows/>', { 'content-type': 'application/xml' });
    expect(xml.status).toBe(415);
    expect(await cluster.meta.findTable('bad')).toBeUndefined();
  });
});

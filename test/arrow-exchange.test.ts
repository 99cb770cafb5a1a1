/**
 * The Arrow IPC exchange between the stages: every type it carries, NULLs at every level, nested
 * values and chunk boundaries arrive in another DuckDB exactly as the first one computed them.
 */
import { PassThrough } from 'node:stream';
import { DuckDBInstance } from '@duckdb/node-api';
import * as arrow from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendArrowStream, arrowStream } from '../services/common/arrow-exchange.js';
import { readJsonResult } from '../services/coordinator/result-json.js';

/** Columns of every type the exchange carries, NULL in some rows, over 5,000 rows (three DuckDB chunks). */
const EVERY_TYPE = `SELECT i, (i % 100)::TINYINT AS t, ((i % 30) * 1000)::SMALLINT AS s, i::UBIGINT * 1000000000000 AS ub,
    i::HUGEINT * 10000000000000000000000000 AS h, (-i)::HUGEINT - 170141183460469231731687303715884100000 AS hn, 340282366920938463463374607431768211455::UHUGEINT - i AS uh,
    ((i % 600) * 1.5)::DECIMAL(4,1) AS d4, (i * -1.25)::DECIMAL(9,2) AS d9, (i * -123456.789)::DECIMAL(18,3) AS d18, (i * -1234567890123456789.123)::DECIMAL(38,3) AS d38,
    CASE WHEN i % 3 = 0 THEN NULL ELSE i / 7.0 END AS dbl, '-0.0'::DOUBLE AS negz, 'inf'::DOUBLE AS inf, 'nan'::DOUBLE AS nan, i::FLOAT / 3 AS f,
    i % 2 = 0 AS b, CASE WHEN i % 5 = 0 THEN NULL ELSE i % 2 = 1 END AS bn,
    DATE '2026-11-01' + i::INT AS dt, TIME '12:34:56.789012' AS tm, TIMESTAMP '2026-11-01' + to_microseconds(i) AS ts, TIMESTAMP_NS '2026-11-01 00:00:00.123456789' AS tns,
    TIMESTAMP_MS '2026-11-01 00:00:00.123' AS tms, TIMESTAMP_S '2026-11-01 00:00:01' AS tsec, TIMESTAMPTZ '2026-11-01 00:00:00.5+00' AS tz, TIMETZ '12:00:00+05' AS ttz,
    INTERVAL (i) DAY + INTERVAL 3 MONTH + to_microseconds(i) AS iv, '8ac7f0b2-0000-4000-8000-00000000000a'::UUID AS u,
    CASE WHEN i % 4 = 0 THEN NULL ELSE repeat('x', i % 30) END AS str, 'ünïcødé ' || i AS uni, '\\xAA\\x00'::BLOB AS bl, '101'::BIT AS bit, 12345678901234567890123456789::BIGNUM AS big,
    [i, NULL, i + 1] AS lst, CASE WHEN i % 3 = 0 THEN NULL ELSE ['a', repeat('long', i % 7), NULL] END AS lstr,
    {'a': i, 'b': [1.5, '-0.0'::DOUBLE], 'c': {'d': 'e' || i}} AS st, CASE WHEN i % 7 = 0 THEN NULL ELSE MAP {'k' || i: [i]} END AS m,
    [i, i + 1]::INT[2] AS arr, [[i], [], NULL] AS nested, [{'x': [NULL, 'y' || repeat('z', i % 20)]}] AS deep
  FROM range(0, 5000) t(i)`;

describe('the Arrow exchange', () => {
  let source: DuckDBInstance;
  let target: DuckDBInstance;

  beforeAll(async () => {
    source = await DuckDBInstance.create(':memory:');
    target = await DuckDBInstance.create(':memory:');
  });
  afterAll(() => {
    source.closeSync();
    target.closeSync();
  });

  /** Streams `sql`'s result from the source into a new table of the target; resolves with the bytes sent. */
  async function exchange(sql: string, table: string): Promise<{ bytes: number; rows: number }> {
    const from = await source.connect();
    const to = await target.connect();
    try {
      const described = await from.runAndReadAll(`DESCRIBE ${sql}`);
      await to.run(
        `CREATE TABLE ${table} (${described
          .getRows()
          .map((r) => `"${String(r[0])}" ${String(r[1])}`)
          .join(', ')})`,
      );
      const result = await from.stream(sql);
      let bytes = 0;
      const wire = arrowStream(result).pipe(
        new PassThrough({
          transform(part: Buffer, _encoding, done) {
            bytes += part.length;
            done(null, part);
          },
        }),
      );
      const appender = await to.createAppender(table);
      const rows = await appendArrowStream(wire, appender, result.columnTypes());
      appender.flushSync();
      appender.closeSync();
      return { bytes, rows };
    } finally {
      from.closeSync();
      to.closeSync();
    }
  }

  it('carries every type, NULLs and nested values included, exactly', async () => {
    const { rows } = await exchange(EVERY_TYPE, 'every_type');
    expect(rows).toBe(5_000);
    const a = await source.connect();
    const b = await target.connect();
    const expected = await readJsonResult(await a.stream(`${EVERY_TYPE} ORDER BY i`));
    const actual = await readJsonResult(await b.stream('SELECT * FROM every_type ORDER BY i'));
    expect(actual.types).toEqual(expected.types);
    expect(actual.rows).toEqual(expected.rows);
    // JSON cannot tell -0.0 from 0.0: DuckDB can.
    const signs = await b.runAndReadAll(
      'SELECT count(*) FILTER (WHERE signbit(negz)), count(*) FILTER (WHERE signbit(st.b[2])), count(*) FILTER (WHERE isnan(nan)) FROM every_type',
    );
    expect(signs.getRows()).toEqual([[5000n, 5000n, 5000n]]);
    a.closeSync();
    b.closeSync();
  });

  it('sends a valid Arrow IPC stream that names each DuckDB type, and an empty result as no rows', async () => {
    const c = await source.connect();
    const parts: Buffer[] = [];
    for await (const part of arrowStream(
      await c.stream("SELECT 1::HUGEINT AS h, 'x' AS v, 2.5::DECIMAL(9,1) AS d FROM range(3)"),
    ))
      parts.push(part as Buffer);
    const table = arrow.tableFromIPC(Buffer.concat(parts));
    expect(table.numRows).toBe(3);
    expect(table.schema.fields.map((f) => f.metadata.get('duckdb.type'))).toEqual([
      'HUGEINT',
      'VARCHAR',
      'DECIMAL(9,1)',
    ]);
    expect(table.getChild('v')!.toArray()).toEqual(['x', 'x', 'x']);
    c.closeSync();
    expect((await exchange('SELECT i, i::VARCHAR AS s FROM range(0) t(i)', 'nothing')).rows).toBe(0);
  });
});

/**
 * The Arrow IPC exchange between the stages: every type it carries, NULLs at every level, nested
 * values and chunk boundaries arrive in another DuckDB exactly as the first one computed them, and
 * bytes too few for the type they are read as are refused, never read past.
 */
import { PassThrough } from 'node:stream';
import { DuckDBInstance } from '@duckdb/node-api';
import * as arrow from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendBatch, arrowBatches, arrowStream } from '../services/common/arrow-exchange.js';
import { readJsonResult } from '../services/common/final-stage/result-json.js';
import { EVERY_TYPE } from './helpers/every-type.js';

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
      let rows = 0;
      for await (const batch of arrowBatches(wire)) {
        appendBatch(appender, result.columnTypes(), batch);
        rows += batch.numRows;
      }
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

  it('carries long strings whole and in order, whether DuckDB laid them out one after another or not', async () => {
    // Out of line in DuckDB's memory: written in order, then shuffled by a sort, then one value repeated, NULLs between.
    const sql = `SELECT i, s, CASE WHEN i % 3 = 0 THEN NULL WHEN i % 3 = 1 THEN 'the same long string each time' ELSE s END AS r
      FROM (SELECT i, 'a long string, number ' || i || repeat('!', i % 17) AS s FROM range(0, 6000) t(i)) ORDER BY hash(i)`;
    await exchange(sql, 'long_strings');
    const a = await source.connect();
    const b = await target.connect();
    const expected = await readJsonResult(await a.stream(`SELECT * FROM (${sql}) ORDER BY i`));
    const actual = await readJsonResult(await b.stream('SELECT * FROM long_strings ORDER BY i'));
    expect(actual.rows).toEqual(expected.rows);
    a.closeSync();
    b.closeSync();
  });

  it('refuses a batch with a string that is not valid UTF-8, rather than taking a row as NULL', async () => {
    const strings = arrow.vectorFromArray(['a long string, valid', 'another long string, then ü'], new arrow.Utf8());
    const batch = new arrow.RecordBatch({ s: strings.data[0]! });
    const to = await target.connect();
    try {
      await to.run('CREATE TABLE utf8_check (s VARCHAR)');
      const appender = await to.createAppender('utf8_check');
      const types = (await to.runAndReadAll('SELECT s FROM utf8_check')).columnTypes();
      appendBatch(appender, types, batch); // valid: taken
      const column = batch.data.children[0]!;
      (column.values as Uint8Array)[column.valueOffsets[2]! - 2] = 0xff; // the second string's ü, cut
      expect(() => appendBatch(appender, types, batch)).toThrow(
        'the exchange was sent a string that is not valid UTF-8',
      );
      appender.closeSync();
      expect((await to.runAndReadAll('SELECT s FROM utf8_check')).getRows()).toEqual([
        ['a long string, valid'],
        ['another long string, then ü'],
      ]);
    } finally {
      to.closeSync();
    }
  });

  it('refuses to read values wider than the bytes a batch holds, rather than read past its buffer', async () => {
    // Three 8-byte doubles taken for 16-byte HUGEINTs would need 48 bytes of a 24-byte buffer.
    const doubles = arrow.makeData({ type: new arrow.Float64(), length: 3, data: Float64Array.from([1.5, -2, 3]) });
    const batch = new arrow.RecordBatch({ h: doubles });
    const to = await target.connect();
    try {
      await to.run('CREATE TABLE wide_check (h HUGEINT)');
      const appender = await to.createAppender('wide_check');
      const types = (await to.runAndReadAll('SELECT h FROM wide_check')).columnTypes();
      expect(() => appendBatch(appender, types, batch)).toThrow(
        'the exchange sent 24 bytes of HUGEINT where 48 are needed',
      );
      appender.closeSync();
      expect((await to.runAndReadAll('SELECT count(*) FROM wide_check')).getRows()).toEqual([[0n]]);
    } finally {
      to.closeSync();
    }
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

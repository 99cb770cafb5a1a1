/**
 * The typing rule (core/json-typing.ts) against its own words: each example in docs/types.md's
 * table of first batches gets the type the table says, and the cases the issue found.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DuckDBInstance } from '@duckdb/node-api';
import {
  ColumnInference,
  DATE_TEXT,
  exactInDouble,
  jsonReadType,
  NumberText,
  onTheCalendar,
  TIMESTAMP_TEXT,
  TypingRefusal,
} from '../core/json-typing.js';
import { parseRow } from '../services/coordinator/ingest/ndjson-rows.js';

/** The columns a batch of NDJSON lines gets, or the refusal's message. */
function typesOf(lines: string[], timestampColumn = 'ts'): Record<string, string> | string {
  const inference = new ColumnInference();
  try {
    for (const line of lines) inference.add(parseRow(line) as Record<string, unknown>);
    return Object.fromEntries(inference.columns(timestampColumn).map((c) => [c.name, c.type]));
  } catch (error) {
    if (error instanceof TypingRefusal) return error.message;
    throw error;
  }
}

/** docs/types.md's table of first batches: each row's example values and the type it names. */
function documentedExamples(): { values: string; type: string }[] {
  const text = readFileSync(new URL('../docs/types.md', import.meta.url), 'utf8');
  const table = text.slice(text.indexOf('## The first batch'), text.indexOf('## Later batches'));
  return table
    .split('\n')
    .filter((line) => /^\| .*`\[/.test(line))
    .map((line) => {
      const cells = line.split(' | ');
      return { values: /`(.*)`/.exec(cells[1]!)![1]!, type: cells[2]!.replace(/[`|]/g, '').trim() };
    });
}

describe('the typing rule', () => {
  it('gives each example in docs/types.md the type the table names', () => {
    const examples = documentedExamples();
    expect(examples.length).toBeGreaterThanOrEqual(15);
    for (const { values, type } of examples) {
      // Each value goes in a row of its own, as the field `x`, the way a batch brings them.
      const items = (parseRow(`{"x": ${values}}`) as { x: unknown[] }).x;
      const lines = items.map((item) => `{"ts": "2026-11-01T00:00:00Z", "x": ${jsonText(item)}}`);
      const got = typesOf(lines);
      if (type === 'refused') expect(got, values).toMatch(/^field "x": /);
      else expect(typeof got === 'string' ? got : described(got.x!), values).toBe(type);
    }
  });

  it('types small integers of both signs BIGINT, never HUGEINT', () => {
    expect(typesOf(['{"ts":"2026-11-01 00:00:00","x":3}', '{"ts":"2026-11-01 00:00:00","x":-1}'])).toEqual({
      ts: 'TIMESTAMP',
      x: 'BIGINT',
    });
  });

  it('types nested values by the same rule as top-level ones', () => {
    expect(
      typesOf(['{"ts":"2026-11-01T00:00:00Z","o":{"id":-1,"in":{"at":"2026-11-01T05:30:00+05:30"}},"l":[-1,2]}']),
    ).toEqual({
      ts: 'TIMESTAMP',
      o: 'STRUCT("id" BIGINT, "in" STRUCT("at" TIMESTAMP))',
      l: 'BIGINT[]',
    });
  });

  it('refuses fields that differ only in case, naming both', () => {
    expect(typesOf(['{"ts":"2026-11-01T00:00:00Z","userId":1}', '{"ts":"2026-11-01T00:00:00Z","userid":2}'])).toMatch(
      /field "userid": differs from field "userId" only in case/,
    );
  });

  it('refuses epoch numbers in the timestamp column and says what to send', () => {
    expect(typesOf(['{"ts":1730419200000}'])).toMatch(/field "ts": .*ISO 8601.*epoch numbers are not read as times/);
    expect(typesOf(['{"ts":"yesterday"}'])).toMatch(/"yesterday" is not a timestamp/);
  });

  it("keeps a number that is not JSON's number apart from an object that looks like one", () => {
    expect(typesOf(['{"ts":"2026-11-01T00:00:00Z","o":{"digits":"5"}}'])).toEqual({
      ts: 'TIMESTAMP',
      o: 'STRUCT("digits" VARCHAR)',
    });
  });

  it('knows which numbers a DOUBLE keeps', () => {
    for (const kept of ['0.1', '1e300', '-0.0', '18446744073709551616', '9007199254740992', '5e-324', '2.50'])
      expect(exactInDouble(kept), kept).toBe(true);
    for (const lost of ['9007199254740993', '1.00000000000000000001', '1e400', '0.30000000000000001'])
      expect(exactInDouble(lost), lost).toBe(false);
  });

  it('tells a date or date-time on the calendar from one only shaped like it, as DuckDB reads them', async () => {
    const texts: string[] = [];
    for (const year of ['0000', '1900', '2000', '2024', '2026', '2100'])
      for (const month of ['00', '01', '02', '04', '12', '13'])
        for (const day of ['00', '01', '28', '29', '30', '31', '32']) {
          texts.push(`${year}-${month}-${day}`);
          for (const time of [
            '00:00:00',
            '23:59:59.999999',
            '24:00:00',
            '24:00:00.000',
            '24:00:00.5',
            '24:00:01',
            '23:60:00',
            '23:59:60',
          ])
            texts.push(`${year}-${month}-${day}T${time}Z`, `${year}-${month}-${day} ${time}+05:30`);
        }
    const instance = await DuckDBInstance.create(':memory:');
    const c = await instance.connect();
    try {
      await c.run(`SET TimeZone = 'UTC'`);
      const read = (
        await c.runAndReadAll(
          `SELECT t, CASE WHEN length(t) = 10 THEN TRY_CAST(t AS DATE) IS NOT NULL ELSE TRY_CAST(t AS TIMESTAMPTZ) IS NOT NULL END FROM unnest([${texts.map((t) => `'${t}'`).join(', ')}]) AS u(t)`,
        )
      ).getRows();
      expect(read).toHaveLength(texts.length);
      for (const [text, duckdb] of read) {
        expect(TIMESTAMP_TEXT.test(text as string) || DATE_TEXT.test(text as string), text as string).toBe(true);
        expect(onTheCalendar(text as string), text as string).toBe(duckdb);
      }
    } finally {
      c.closeSync();
      instance.closeSync();
    }
  });

  it('gives a copy of an inference to try a row on, leaving the inference as it was', () => {
    const inference = new ColumnInference();
    inference.add({ ts: '2026-11-01T00:00:00Z', n: 1, tags: { a: 'x' } });
    const probe = inference.clone();
    probe.add({ ts: '2026-11-01T00:00:01Z', n: 'one', tags: { b: 2 } });
    expect(probe.columns('ts')).toEqual([
      { name: 'ts', type: 'TIMESTAMP' },
      { name: 'n', type: 'JSON' },
      { name: 'tags', type: 'STRUCT("a" VARCHAR, "b" BIGINT)' },
    ]);
    expect(inference.columns('ts')).toEqual([
      { name: 'ts', type: 'TIMESTAMP' },
      { name: 'n', type: 'BIGINT' },
      { name: 'tags', type: 'STRUCT("a" VARCHAR)' },
    ]);
  });

  it('reads every TIMESTAMP in a type as a TIMESTAMPTZ, and nothing else', () => {
    expect(
      jsonReadType('STRUCT("TIMESTAMP" TIMESTAMP, b TIMESTAMP[], c TIMESTAMP_NS, d TIMESTAMP WITH TIME ZONE)'),
    ).toBe('STRUCT("TIMESTAMP" TIMESTAMPTZ, b TIMESTAMPTZ[], c TIMESTAMP_NS, d TIMESTAMP WITH TIME ZONE)');
  });
});

/** A parsed value as JSON text again, each number as the batch wrote it. */
function jsonText(value: unknown): string {
  if (value instanceof NumberText) return value.digits;
  if (Array.isArray(value)) return `[${value.map(jsonText).join(',')}]`;
  if (value !== null && typeof value === 'object')
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}:${jsonText(v)}`)
      .join(',')}}`;
  return JSON.stringify(value);
}

/** A type as DuckDB's DESCRIBE spells it, which quotes a STRUCT member's name only where it must. */
const described = (type: string) => type.replace(/"([a-z_][a-z0-9_]*)"/g, '$1');

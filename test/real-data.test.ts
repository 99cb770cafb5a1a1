/**
 * Real data sets nobody here wrote (the vega-datasets package's JSON files: nulls, negative
 * numbers, integers and fractions in one field, unicode, dates from 1854 on, skewed groups),
 * ingested as a user would (each file's rows as NDJSON, in the file's order, one batch a file:
 * a table's types come from its first batch, and cars.json's first third has no fraction in a
 * field its second third has) and queried through Berth. Each answer equals one DuckDB's over the same segment files, and the
 * totals equal DuckDB's over the package's own file.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqlString } from '../services/common/duckdb.js';
import { readJsonResult } from '../services/common/final-stage/result-json.js';
import { expectSameResult } from './helpers/compare-results.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { referenceFor, type Reference } from './helpers/reference.js';

/** The package's data folder, from the project's own node_modules (its exports name no package.json). */
const DATA = fileURLToPath(new URL('../node_modules/vega-datasets/data', import.meta.url));

/** Each table: the package's file and the field that is its timestamp column. */
const TABLES = {
  cars: { file: 'cars.json', ts: 'Year' },
  unemployment: { file: 'unemployment-across-industries.json', ts: 'date' },
  ohlc: { file: 'ohlc.json', ts: 'date' },
  football: { file: 'football.json', ts: 'date' },
  crimea: { file: 'crimea.json', ts: 'date' },
};

const QUERIES: { sql: string; ordered: boolean }[] = [
  {
    sql: 'SELECT Origin, count(*), avg(Miles_per_Gallon), min(Horsepower), max(Weight_in_lbs), count(Horsepower) FROM cars GROUP BY Origin ORDER BY Origin',
    ordered: true,
  },
  { sql: 'SELECT Name, Horsepower, Year FROM cars WHERE Miles_per_Gallon IS NULL ORDER BY Name, Year', ordered: true },
  {
    sql: 'SELECT year(Year) AS y, count(DISTINCT Name), median(Acceleration) FROM cars GROUP BY y ORDER BY y',
    ordered: true,
  },
  { sql: 'SELECT * FROM cars ORDER BY Name, Year, Weight_in_lbs', ordered: true },
  {
    sql: 'SELECT series, sum(count), max(rate), min(date) FROM unemployment GROUP BY series ORDER BY series',
    ordered: true,
  },
  {
    sql: "SELECT date, rate FROM unemployment WHERE date >= '2009-01-01' AND series = 'Finance' ORDER BY date",
    ordered: true,
  },
  {
    sql: 'SELECT signal, count(*), sum(ret), min(ret), max(low) FROM ohlc GROUP BY signal ORDER BY signal',
    ordered: true,
  },
  {
    sql: 'SELECT date, close, avg(close) OVER (ORDER BY date ROWS BETWEEN 4 PRECEDING AND CURRENT ROW) AS ma FROM ohlc ORDER BY date',
    ordered: true,
  },
  {
    sql: 'SELECT division, count(*), sum(home_score - away_score), max(home_score) FROM football GROUP BY division ORDER BY division',
    ordered: true,
  },
  {
    sql: 'SELECT home_team, count(*) AS wins FROM football WHERE home_score > away_score GROUP BY home_team ORDER BY wins DESC, home_team LIMIT 10',
    ordered: true,
  },
  {
    sql: "SELECT sum(disease), max(army_size), count(*) FROM crimea WHERE date < '1855-01-01'",
    ordered: true,
  },
  {
    sql: 'SELECT c.date, c.disease, count(f.date) FROM crimea c LEFT JOIN football f ON month(c.date) = month(f.date) GROUP BY ALL ORDER BY c.date',
    ordered: true,
  },
];

describe('real data sets from a package', () => {
  let cluster: TestCluster;
  let reference: Reference;
  let duckdb: DuckDBInstance;

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2, 2, 1] });
    for (const [table, { file, ts }] of Object.entries(TABLES)) {
      const rows = JSON.parse(await readFile(path.join(DATA, file), 'utf8')) as object[];
      const response = await fetch(`${cluster.coordinator.url}/v1/tables/${table}/rows?timestampColumn=${ts}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-ndjson', authorization: `Bearer ${TOKEN}` },
        body: rows.map((row) => JSON.stringify(row)).join('\n'),
      });
      expect(response.status, `${table}: ${await response.clone().text()}`).toBe(200);
    }
    reference = await referenceFor(cluster, Object.keys(TABLES));
    duckdb = await DuckDBInstance.create(':memory:');
  });
  afterAll(async () => {
    reference?.close();
    duckdb?.closeSync();
    await cluster?.close();
  });

  it('answers each query as one DuckDB over the same segment files, values and types', async () => {
    for (const { sql, ordered } of QUERIES) {
      const { status, body } = await cluster.query(sql);
      expect(status, `${sql}: ${body.message}`).toBe(200);
      const expected = await reference.run(sql);
      if ('error' in expected) throw new Error(`the reference refused ${sql}: ${expected.error}`);
      expectSameResult(body, expected.result, ordered, sql);
    }
  });

  it("holds every row, null and integer total of the package's own files", async () => {
    const c = await duckdb.connect();
    try {
      const totals = async (from: string, columns: string[]) =>
        (
          await readJsonResult(
            await c.stream(
              `SELECT count(*), ${columns.map((col) => `count("${col}"), sum("${col}")::VARCHAR`).join(', ')} FROM ${from}`,
            ),
          )
        ).rows;
      const integers: Record<keyof typeof TABLES, string[]> = {
        cars: ['Cylinders', 'Horsepower', 'Weight_in_lbs'],
        unemployment: ['year', 'month', 'count'],
        ohlc: [],
        football: ['home_score', 'away_score'],
        crimea: ['wounds', 'other', 'disease', 'army_size'],
      };
      for (const [table, columns] of Object.entries(integers)) {
        const file = path.join(DATA, TABLES[table as keyof typeof TABLES].file);
        const { status, body } = await cluster.query(
          `SELECT count(*), ${columns.map((col) => `count("${col}"), sum("${col}")::VARCHAR`).join(', ')} FROM ${table}`,
        );
        expect(status, body.message).toBe(200);
        expect(body.rows, table).toEqual(await totals(`read_json(${sqlString(file)})`, columns));
      }
    } finally {
      c.closeSync();
    }
  });
});

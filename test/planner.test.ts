/**
 * The planner's decompositions, executed locally: each query's node SQL runs over several groups
 * of files (as owners would), the final SQL finishes them, and the answer must equal one DuckDB
 * over all the files. The same corpus runs through the real services in coordinator.test.ts.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arrowStream } from '../services/common/arrow-exchange.js';
import { Planner } from '../services/coordinator/planning/planner.js';
import { Scanner } from '../services/common/scanner.js';
import { bindParameters, type SqlParameter } from '../services/common/sql-parameters.js';
import { toJsonResult } from '../services/common/final-stage/result-json.js';
import { SqlEngine } from '../services/coordinator/sql-engine.js';
import type { TableInfo } from '../services/meta/client.js';
import { QUERY_CORPUS } from './fixtures/query-corpus.js';
import { expectSameResult } from './helpers/compare-results.js';
import { EVENT_COLUMNS, writeEventFiles } from './helpers/event-data.js';

const EVENTS: TableInfo = { name: 'events', timestampColumn: 'ts', columns: EVENT_COLUMNS, incarnation: 1 };

describe('planner decompositions', () => {
  let dir: string;
  let files: string[];
  let engine: SqlEngine;
  let planner: Planner;
  let reference: DuckDBInstance;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-planner-'));
    // The engine only reads files inside its own directory: put the data there. A budget of 16 KiB
    // holds small partials in memory and sends larger ones to tables, mid-stream: the corpus reads both.
    engine = await SqlEngine.open(path.join(dir, 'scratch'), { exchangeMemoryBytes: 16 * 1024 });
    await mkdir(path.join(dir, 'scratch', 'data'));
    files = await writeEventFiles(path.join(dir, 'scratch', 'data'), 6, 5_000);
    planner = new Planner(engine, async (name) => (name === 'events' ? EVENTS : undefined));
    reference = await DuckDBInstance.create(':memory:');
    const c = await reference.connect();
    await c.run(`CREATE VIEW events AS SELECT * FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}])`);
    c.closeSync();
  });
  afterAll(async () => {
    engine.close();
    reference.closeSync();
    await rm(dir, { recursive: true, force: true });
  });

  /** Runs a plan the way the cluster does, with each group of files standing for one owner and Arrow streams between the stages. */
  async function runScattered(sql: string, groups: string[][]) {
    const plan = await planner.plan(sql);
    const owners = new Scanner(reference);
    const exchange = await engine.openExchange(plan.inputs.map((i) => ({ name: i.name, columns: i.exchange })));
    try {
      for (const input of plan.inputs) {
        for (const group of groups) {
          const scan = await owners.open(
            input.sql,
            [{ name: 'events', schema: EVENT_COLUMNS, columns: input.columns, files: group }],
            undefined,
            plan.parameters,
          );
          let ended = false;
          try {
            await exchange.receive(input.name, arrowStream(scan.result));
            ended = true;
          } finally {
            scan.close(ended);
          }
        }
      }
      return { plan, result: await exchange.finish(plan.finalSql, { parameters: plan.parameters }) };
    } finally {
      await exchange.close();
    }
  }

  it.each(QUERY_CORPUS)('answers "$name" exactly as one DuckDB does', async ({ name, sql, ordered }) => {
    const c = await reference.connect();
    const expected = toJsonResult(await c.runAndReadAll(sql));
    c.closeSync();
    const { result } = await runScattered(sql, [files.slice(0, 1), files.slice(1, 4), files.slice(4)]);
    expectSameResult(result, expected, ordered, name);
  });

  it.each([
    // A bare ORDER BY name that a star's REPLACE, RENAME or COLUMNS gives an output is that output.
    'SELECT * REPLACE (-bytes AS bytes) FROM events ORDER BY bytes, ts LIMIT 3',
    'SELECT * EXCLUDE (service) RENAME (level AS service) FROM events ORDER BY service, ts LIMIT 5',
    "SELECT upper(COLUMNS('service')), ts FROM events ORDER BY service DESC, ts LIMIT 4",
    // A limit by percentage applies to every row: only the final stage can.
    'SELECT service, ts FROM events ORDER BY ts LIMIT 1%',
    'SELECT service FROM events ORDER BY ts DESC LIMIT 2%',
  ])('answers %s, a top-k the owners cannot take alone, as one DuckDB', async (sql) => {
    const c = await reference.connect();
    const expected = toJsonResult(await c.runAndReadAll(sql));
    c.closeSync();
    const { result } = await runScattered(sql, [files.slice(0, 1), files.slice(1, 4), files.slice(4)]);
    expectSameResult(result, expected, true, sql);
  });

  it.each([
    ['SELECT service, count(*), avg(latency_ms) FROM events GROUP BY service', 'aggregate'],
    ['SELECT * FROM events ORDER BY ts LIMIT 5', 'select'],
    ['SELECT service FROM events ORDER BY ts DESC LIMIT 5', 'select'],
    ['SELECT service FROM events ORDER BY bytes % 7, ts LIMIT 5', 'rows'],
    ['SELECT DISTINCT service FROM events ORDER BY service LIMIT 5', 'select'],
    ['SELECT count(DISTINCT user_id) FROM events', 'aggregate'],
    ['SELECT DISTINCT service FROM events', 'select'],
    ['SELECT sum(bytes) OVER () FROM events', 'rows'],
    ['SELECT quantile_cont(latency_ms, 0.9) FROM events', 'rows'],
  ])('routes %s as %s', async (sql, route) => {
    expect((await planner.plan(sql)).route).toBe(route);
  });

  it('answers a query with spaces around it as DuckDB reads them, its serializer tripping on some', async () => {
    for (const sql of [
      'SELECT count(*) FROM events ORDER BY 1\u00a0',
      '\u000bSELECT count(*) FROM events\u000b',
      '\u3000SELECT count(*) FROM events\u2003\n',
      // DuckDB reads a final U+00A0 as part of the name before it, where that parses.
      'SELECT max(status) AS "hi\u00a0" FROM events ORDER BY hi\u00a0',
    ]) {
      const c = await reference.connect();
      const expected = toJsonResult(await c.runAndReadAll(sql));
      c.closeSync();
      const { result } = await runScattered(sql, [files]);
      expectSameResult(result, expected, true, JSON.stringify(sql));
    }
  });

  it('reads the time window from WHERE for pruning', async () => {
    const plan = await planner.plan(
      "SELECT count(*) FROM events WHERE ts >= '2026-11-03' AND ts < TIMESTAMP '2026-11-05' AND status = 200",
    );
    expect(plan.inputs[0]!.window).toEqual({ from: Date.UTC(2026, 10, 3), to: Date.UTC(2026, 10, 5) });
  });

  it.each([
    ['SELECT service, sum(bytes) AS bytes FROM events GROUP BY service', ['service', 'bytes']],
    ['SELECT e.status AS service, max(e.ts) AS ts FROM events AS e GROUP BY 1', ['ts', 'status']],
    ['SELECT events FROM events LIMIT 1', EVENT_COLUMNS.map((c) => c.name)],
    ['SELECT e FROM events AS e LIMIT 1', EVENT_COLUMNS.map((c) => c.name)],
  ])('has the owners read only the columns %s names', async (sql, columns) => {
    // An alias that is also a column's name reads no more columns; a relation's name read as a value (the whole row) reads all.
    expect((await planner.plan(sql)).inputs[0]!.columns).toEqual(columns);
  });

  it.each([
    ['SELEKT 1', /syntax error/],
    ['SELECT nope FROM events', /nope/],
    ['SELECT * FROM missing', /unknown table "missing"/],
    ["SELECT * FROM read_csv('/etc/passwd')", /not allowed: table function read_csv/],
    ['SELECT 1; SELECT 2', /exactly one/],
    ['SELECT max(status) AS hi FROM events ORDER BY hi\u00a0', /Referenced column "hi\u00a0" not found/],
    ["COPY events TO 'x.csv'", /./],
  ])('rejects %s with a 400 that carries the reason', async (sql, message) => {
    await expect(planner.plan(sql)).rejects.toMatchObject({ kind: 'invalid', message: expect.stringMatching(message) });
  });
});

describe('pruning soundness', () => {
  it('never prunes a table by a WHERE that filters something else (a CTE over it)', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-planner-'));
    const engine = await SqlEngine.open(path.join(dir, 'scratch'));
    try {
      const planner = new Planner(engine, async () => EVENTS);
      const plan = await planner.plan(
        "WITH latest AS (SELECT max(ts) AS ts FROM events) SELECT * FROM latest WHERE ts > '2026-11-05'",
      );
      expect(plan.route).toBe('rows');
      expect(plan.inputs[0]!.window).toEqual({});
    } finally {
      engine.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('a lifted literal bound as a parameter', () => {
  it('compares as the literal does, an integer bound as the type it is compared with (a UHUGEINT past 2^63)', async () => {
    const duckdb = await DuckDBInstance.create(':memory:');
    const c = await duckdb.connect();
    try {
      await c.run(
        `CREATE TABLE big AS SELECT * FROM (VALUES ('18446744073709551616'::UHUGEINT, 5::UTINYINT, 'x'), (7, 200, 'y')) t(uh, small, s)`,
      );
      const cases: [string, string, SqlParameter[]][] = [
        ['uh > 1', 'uh > $p1', [{ name: 'p1', type: 'INTEGER', value: '1' }]],
        ['uh <> 3000000000', 'uh <> $p1', [{ name: 'p1', type: 'BIGINT', value: '3000000000' }]],
        [
          'uh IN (7, 8)',
          'uh IN ($p1, $p2)',
          [
            { name: 'p1', type: 'INTEGER', value: '7' },
            { name: 'p2', type: 'INTEGER', value: '8' },
          ],
        ],
        ['small < 3000000000', 'small < $p1', [{ name: 'p1', type: 'BIGINT', value: '3000000000' }]],
        ['small = -1', 'small = $p1', [{ name: 'p1', type: 'INTEGER', value: '-1' }]],
        ["s = 'y'", 's = $p1', [{ name: 'p1', type: 'VARCHAR', value: 'y' }]],
      ];
      for (const [literal, template, parameters] of cases) {
        const expected = (await c.runAndReadAll(`SELECT count(*) FROM big WHERE ${literal}`)).getRows();
        const prepared = await c.prepare(`SELECT count(*) FROM big WHERE ${template}`);
        bindParameters(prepared, parameters);
        expect((await prepared.runAndReadAll()).getRows(), literal).toEqual(expected);
      }
    } finally {
      c.closeSync();
      duckdb.closeSync();
    }
  });
});

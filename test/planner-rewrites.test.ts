/**
 * Issue 25's planner findings, each answered on a real cluster and compared with one DuckDB over
 * the same segment files: every rewrite the planner makes (time pruning, filter pushdown, column
 * pruning, decomposition) must work on names resolved the way DuckDB binds them, never on a
 * name's last part. Each query runs twice: planned, then from the plan cache.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectSameResult } from './helpers/compare-results.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';
import { referenceFor, type Reference } from './helpers/reference.js';

/**
 * `pr(ts, d DATE, v, w, s STRUCT(ts))`: ts in 2026, d and s.ts in 2031, so that a bound on
 * anything but the real ts must prune nothing. v rises as w falls (`v > 105` and `w > 105` hold
 * on different rows), and s.ts as ts falls.
 */
const prBatch = (batch: number) =>
  Array.from({ length: 5 }, (_, j) => {
    const i = batch * 5 + j;
    const day = String(i + 1).padStart(2, '0');
    const back = String(10 - i).padStart(2, '0');
    return JSON.stringify({
      ts: `2026-01-${day}T00:00:00Z`,
      d: `2031-02-${day}`,
      v: 100 + i,
      w: 109 - i,
      s: { ts: `2031-03-${back}T00:00:00Z` },
    });
  }).join('\n');

describe('the planner’s rewrites on resolved names (issue 25)', () => {
  let cluster: TestCluster;
  let reference: Reference;

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2, 1] });
    for (const batch of [0, 1]) {
      const { status, body } = await cluster.ingest('pr', prBatch(batch));
      expect(status, JSON.stringify(body)).toBe(200);
    }
    reference = await referenceFor(cluster, ['pr']);
  });
  afterAll(async () => {
    reference?.close();
    await cluster?.close();
  });

  /** Asks the cluster twice (planned, then cached) and the reference once; returns the first answer's stats. */
  async function expectAsReference(sql: string, ordered: boolean) {
    const expected = await reference.run(sql);
    if (!('result' in expected)) throw new Error(expected.error);
    const first = await cluster.query(sql);
    expect(first.status, first.body.message).toBe(200);
    expectSameResult(first.body, expected.result, ordered, sql);
    const again = await cluster.query(sql);
    expect(again.status, again.body.message).toBe(200);
    expect(again.body.stats.plan).toBe('cached');
    expectSameResult(again.body, expected.result, ordered, `${sql} (cached plan)`);
    return first.body.stats;
  }

  describe('positional references', () => {
    it.each([
      ['in a top-k select', 'SELECT #1 AS a, v FROM pr ORDER BY v LIMIT 3', true],
      ['in a partial aggregate', 'SELECT min(#1), max(v) FROM pr', false],
      ['as a group key', 'SELECT #3 AS k, count(*) FROM pr GROUP BY #3', false],
      ['in a WHERE', 'SELECT v FROM pr WHERE #4 > 105', false],
      ['beside a window', 'SELECT #2 AS d, row_number() OVER (ORDER BY #3) AS n FROM pr', false],
      ['past the named columns', 'SELECT #4 AS w, v FROM pr WHERE v > 103 ORDER BY v', true],
      ['over a join', 'SELECT #8 AS v2 FROM pr AS a JOIN pr AS b ON a.v = b.w ORDER BY 1', true],
    ])('%s: %s', async (_label, sql, ordered) => {
      await expectAsReference(sql, ordered);
    });
  });

  describe('time pruning', () => {
    it('prunes nothing on a struct field named like the timestamp column', async () => {
      await expectAsReference("SELECT count(*) FROM pr WHERE s.ts >= '2030-01-01'", false);
    });

    it('prunes nothing on a column alias named like the timestamp column', async () => {
      await expectAsReference("SELECT count(*) FROM pr AS x(d, ts) WHERE ts >= '2030-01-01'", false);
    });

    it('prunes by the timestamp column under its alias, and not by its old name', async () => {
      const renamed = await expectAsReference("SELECT count(*) FROM pr AS x(t) WHERE t >= '2026-01-06'", false);
      expect(renamed.segments.pruned).toBe(1);
      await expectAsReference("SELECT count(*) FROM pr AS x(t, ts) WHERE ts >= '2026-01-06'", false);
    });

    it('reads a name qualified by a table alias that is also a column as DuckDB does', async () => {
      await expectAsReference("SELECT count(*) FROM pr AS s WHERE s.ts >= '2030-01-01'", false);
      await expectAsReference("SELECT v, row_number() OVER () AS n FROM pr AS s WHERE s.ts < '2026-01-03'", false);
    });

    it('still prunes by the timestamp column, bare, qualified or quoted', async () => {
      for (const sql of [
        "SELECT count(*) FROM pr WHERE ts >= '2026-01-06'",
        "SELECT count(*) FROM pr WHERE pr.ts >= '2026-01-06'",
        'SELECT count(*) FROM pr AS x WHERE x."TS" >= \'2026-01-06\'',
      ]) {
        const stats = await expectAsReference(sql, false);
        expect(stats.segments.pruned, sql).toBe(1);
      }
    });
  });

  describe('filter pushdown', () => {
    it('filters by the column an alias names, not by the column of that name', async () => {
      await expectAsReference(
        'SELECT v, w, row_number() OVER (ORDER BY v) AS n FROM pr AS x(ts, d, w, v) WHERE v > 105',
        false,
      );
    });

    it('filters by the columns COLUMNS() matches by their aliases', async () => {
      await expectAsReference(
        "SELECT v, w, row_number() OVER (ORDER BY v) AS n FROM pr AS x(ts, d, w, v) WHERE COLUMNS('^v$') > 105",
        false,
      );
    });

    it('filters by a struct field, not by the table column of its name', async () => {
      await expectAsReference(
        "SELECT v, row_number() OVER (ORDER BY v) AS n FROM pr WHERE s.ts < '2031-03-03' AND v > 100",
        false,
      );
    });
  });

  describe('ORDER BY on the select route', () => {
    it.each([
      ['a column, not a struct field’s output of its name', 'SELECT s.ts, v FROM pr ORDER BY ts LIMIT 3'],
      ['a select alias before a column', 'SELECT ts AS v, v AS ts FROM pr ORDER BY v LIMIT 3'],
      ['a column through a star', 'SELECT * FROM pr ORDER BY w LIMIT 3'],
      ['a renamed column through a star', 'SELECT * FROM pr AS x(a, b, w) ORDER BY w LIMIT 3'],
    ])('orders by %s: %s', async (_label, sql) => {
      await expectAsReference(sql, true);
    });
  });

  it('answers a UNION value on the select route', async () => {
    await expectAsReference('SELECT v, union_value(k := v) AS x FROM pr ORDER BY v', true);
  });
});

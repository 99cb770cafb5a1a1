/**
 * The plan cache and the coordinator's catalog with the real planner and DuckDB: a query sent
 * again is planned once, a schema change plans it again, a plan that reads the clock is never
 * kept, and the manifest is fetched again only when its version moves. The catalog's meta is a
 * table held in memory whose versions move as meta's do (a schema change cannot be made through
 * meta's API); the same cache runs against real meta, ingest and merges in coordinator.test.ts
 * and merge.test.ts.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { MAX_LIFTED } from '../core/query-plan/literals.js';
import { PlanCache } from '../services/coordinator/planning/plan-cache.js';
import { Planner } from '../services/coordinator/planning/planner.js';
import { SqlEngine } from '../services/coordinator/sql-engine.js';
import { TableCatalog } from '../services/coordinator/planning/table-catalog.js';
import type {
  ManifestChanges,
  ManifestPage,
  SegmentRow,
  TableInfo,
  TableStats,
  TableVersion,
} from '../services/meta/client.js';
import { schemaDigest } from '../services/meta/store.js';
import { EVENT_COLUMNS } from './helpers/event-data.js';

/** Meta's answers for one table, with counts of each call. */
class MemoryMeta {
  table: TableInfo = { name: 'events', timestampColumn: 'ts', columns: EVENT_COLUMNS, incarnation: 1 };
  manifest = 1;
  /** The segment list at each manifest version: the change log. */
  readonly history = new Map<number, SegmentRow[]>([[1, []]]);
  calls = { tableVersion: 0, findTable: 0, manifestChanges: 0, manifestPage: 0, listSegments: 0, tableStats: 0 };
  /** When set, manifest pages wait for it: a first read that takes its time. */
  pages?: Promise<void>;
  /** When set, range reads fail with it. */
  rangeError?: Error;

  /** Commits a new segment list: the manifest version moves. */
  commit(segments: SegmentRow[]): void {
    this.history.set(++this.manifest, [...segments]);
  }

  async tableVersion(name: string): Promise<TableVersion | undefined> {
    this.calls.tableVersion++;
    const answer =
      name === this.table.name
        ? { manifest: this.manifest, schema: schemaDigest(this.table.timestampColumn, this.table.columns) }
        : undefined;
    await new Promise((resolve) => setTimeout(resolve, 5)); // the answer's way back
    return answer;
  }

  async findTable(name: string): Promise<TableInfo | undefined> {
    this.calls.findTable++;
    return name === this.table.name ? this.table : undefined;
  }

  async manifestChanges(_name: string, since: number): Promise<ManifestChanges | 'snapshot'> {
    this.calls.manifestChanges++;
    const before = this.history.get(since);
    if (!before) return 'snapshot';
    const now = this.history.get(this.manifest)!;
    const was = new Set(before.map((s) => s.id));
    const is = new Set(now.map((s) => s.id));
    return {
      version: this.manifest,
      incarnation: this.table.incarnation,
      added: now.filter((s) => !was.has(s.id)),
      retired: before.filter((s) => !is.has(s.id)).map((s) => s.id),
    };
  }

  async manifestPage(): Promise<ManifestPage> {
    this.calls.manifestPage++;
    const version = this.manifest;
    await this.pages;
    return { version, incarnation: this.table.incarnation, segments: this.history.get(version)! };
  }

  async listSegments(_name: string, range: { from?: number; to?: number } = {}): Promise<SegmentRow[]> {
    this.calls.listSegments++;
    if (this.rangeError) throw this.rangeError;
    const { from = -Infinity, to = Infinity } = range;
    return this.history
      .get(this.manifest)!
      .filter((s) => s.maxTs >= from && s.minTs <= to)
      .sort((a, b) => b.maxTs - a.maxTs);
  }

  async tableStats(): Promise<TableStats> {
    this.calls.tableStats++;
    const segments = this.history.get(this.manifest)!;
    return {
      segments: segments.length,
      rows: segments.reduce((n, s) => n + s.rows, 0),
      bytes: segments.reduce((n, s) => n + s.bytes, 0),
      oldest: segments.length > 0 ? Math.min(...segments.map((s) => s.minTs)) : null,
      newest: segments.length > 0 ? Math.max(...segments.map((s) => s.maxTs)) : null,
    };
  }
}

const segment = (id: string, minTs = 0): SegmentRow => ({
  id,
  table: 'events',
  minTs,
  maxTs: minTs + 1,
  rows: 1,
  bytes: 1,
  level: 0,
  state: 'active',
  createdAt: 0,
  retiredAt: null,
  replacedBy: null,
});

describe('the plan cache', () => {
  let dir: string;
  let engine: SqlEngine;
  let meta: MemoryMeta;
  let catalog: TableCatalog;
  let plans: PlanCache;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-plan-cache-'));
    engine = await SqlEngine.open(path.join(dir, 'scratch'));
  });
  afterAll(async () => {
    engine.close();
    await rm(dir, { recursive: true, force: true });
  });
  beforeEach(() => {
    meta = new MemoryMeta();
    catalog = new TableCatalog(meta);
    plans = new PlanCache({ planner: new Planner(engine, async () => undefined), engine, catalog });
  });

  it('plans a query once, however it is laid out, and a literal a WHERE compares is its parameter', async () => {
    const sql = "SELECT service, count(*) AS n FROM events WHERE service = 'a  b' GROUP BY service";
    const first = await plans.plan(sql);
    expect(first.cached).toBe(false);
    const again = await plans.plan(
      "\n  SELECT service,\n\tcount(*)   AS n\n  FROM events\n  WHERE service = 'a  b'\n  GROUP BY service ;".slice(
        0,
        -2,
      ),
    );
    expect(again).toMatchObject({ cached: true, plan: first.plan });
    // Another string where the WHERE compares it: the same plan with another value, and another statement.
    const other = await plans.plan(sql.replace("'a  b'", "'a b'"));
    expect(other).toMatchObject({
      cached: true,
      plan: { ...first.plan, parameters: [{ name: 'p1', type: 'VARCHAR', value: 'a b' }] },
    });
    expect(first.plan.parameters).toEqual([{ name: 'p1', type: 'VARCHAR', value: 'a  b' }]);
    expect(other.statement).not.toBe(first.statement);
    expect((await plans.plan(sql.replace('count(*)', 'count(1)'))).cached).toBe(false);
    // Comments are not the statement.
    expect((await plans.plan(`/* a dashboard's panel */ ${sql} -- refreshed`)).cached).toBe(true);
  });

  it('plans a new text of a template it has parsed without parsing it, with that text’s own values', async () => {
    const parses = vi.spyOn(engine, 'statement');
    try {
      const panel = (day: string, status: string) =>
        `SELECT count(*) AS n FROM events WHERE ts >= TIMESTAMP '2026-11-${day}' AND status >= ${status}`;
      expect((await plans.plan(panel('02', '400'))).cached).toBe(false);
      const parsed = parses.mock.calls.length;
      const next = await plans.plan(panel('03', '500'));
      expect(parses.mock.calls.length).toBe(parsed);
      expect(next).toMatchObject({
        cached: true,
        plan: {
          parameters: [
            { name: 'p1', type: 'VARCHAR', value: '2026-11-03' },
            { name: 'p2', type: 'INTEGER', value: '500' },
          ],
        },
      });
      expect(next.plan.inputs[0]!.window).toEqual({ from: Date.UTC(2026, 10, 3) });
      // Past 32 bits the literal is a BIGINT to DuckDB: another statement, found by a parse.
      const wide = await plans.plan(panel('03', '5000000000'));
      expect(parses.mock.calls.length).toBeGreaterThan(parsed);
      expect(wide.plan.parameters[1]).toEqual({ name: 'p2', type: 'BIGINT', value: '5000000000' });
      // Two panels of one template that differ by a LIMIT: each keeps its own statement.
      const top = (status: number, limit: number) =>
        `SELECT status FROM events WHERE status >= ${status} ORDER BY status LIMIT ${limit}`;
      await plans.plan(top(400, 10));
      await plans.plan(top(400, 20));
      const both = parses.mock.calls.length;
      expect((await plans.plan(top(401, 10))).plan.finalSql).toMatch(/LIMIT 10\b/);
      expect((await plans.plan(top(402, 20))).plan.finalSql).toMatch(/LIMIT 20\b/);
      expect(parses.mock.calls.length).toBe(both);
    } finally {
      parses.mockRestore();
    }
  });

  it('lifts only the literals a WHERE compares: a LIMIT, an IN list’s length, a select list or a type is another plan', async () => {
    const panel = (window: string, status: string, limit = 10) =>
      `SELECT service, status, count(*) AS n FROM events WHERE ts >= ${window} AND status IN (${status}) GROUP BY ALL ORDER BY n DESC LIMIT ${limit}`;
    const first = await plans.plan(panel("TIMESTAMP '2026-11-02'", '500, 502'));
    expect(first.plan.parameters.map((p) => [p.type, p.value])).toEqual([
      ['VARCHAR', '2026-11-02'],
      ['INTEGER', '500'],
      ['INTEGER', '502'],
    ]);
    expect(first.plan.inputs[0]!.window).toEqual({ from: Date.UTC(2026, 10, 2) });
    // Other values of the same kinds: the plan again, its window from these values.
    const moved = await plans.plan(panel("TIMESTAMP '2026-11-04 06:00:00'", '404, 503'));
    expect(moved.cached).toBe(true);
    expect(moved.plan.inputs[0]!.window).toEqual({ from: Date.UTC(2026, 10, 4, 6) });
    expect(moved.plan.parameters.map((p) => p.value)).toEqual(['2026-11-04 06:00:00', '404', '503']);
    // What changes a plan's shape or a value's type stays in the key.
    expect((await plans.plan(panel("TIMESTAMP '2026-11-02'", '500, 502', 20))).cached).toBe(false);
    expect((await plans.plan(panel("TIMESTAMP '2026-11-02'", '500, 502, 503'))).cached).toBe(false);
    expect((await plans.plan(panel("TIMESTAMP '2026-11-02'", '500, 5000000000'))).cached).toBe(false);
    expect((await plans.plan(panel("DATE '2026-11-02'", '500, 502'))).cached).toBe(false);
    // A literal that names a column (a subquery's in the select list) stays: each query names its own.
    const counted = (service: string) =>
      `SELECT (SELECT count(*) FROM events WHERE service = '${service}') FROM events LIMIT 1`;
    await plans.plan(counted('a'));
    const named = await plans.plan(counted('b'));
    expect(named.plan.columns[0]!.name).toContain("'b'");
    expect(named.plan.parameters).toEqual([]);
    // A list too long for a dashboard's shape plans by its whole statement.
    const listed = (n: number) =>
      `SELECT count(*) FROM events WHERE status IN (${Array.from({ length: n }, (_, i) => i).join(', ')})`;
    expect((await plans.plan(listed(MAX_LIFTED))).plan.parameters).toHaveLength(MAX_LIFTED);
    expect((await plans.plan(listed(MAX_LIFTED + 1))).plan.parameters).toEqual([]);
    // A parameter of the query's own would take a lifted literal's value: it is refused, not bound.
    for (const own of ['$p1', '$1', '?'])
      await expect(plans.plan(`SELECT count(*) FROM events WHERE service = 'a' AND status = ${own}`)).rejects.toThrow(
        /has a parameter/,
      );
    const labelled = (label: string) => `SELECT '${label}' AS label, count(*) AS n FROM events WHERE service = 'a'`;
    await plans.plan(labelled('x'));
    expect((await plans.plan(labelled('y'))).cached).toBe(false);
  });

  it('lifts the texts of a time’s arithmetic: a window that INTERVALs span is one plan, bounded at both ends', async () => {
    const panel = (at: string, span = 'INTERVAL 1 HOUR') =>
      `SELECT count(*) AS n FROM events WHERE ts >= TIMESTAMP '${at}' - ${span} AND ts < TIMESTAMP '${at}' + INTERVAL '30 minutes'`;
    const first = await plans.plan(panel('2026-11-02 06:00:00'));
    expect(first.plan.parameters.map((p) => [p.type, p.value])).toEqual([
      ['VARCHAR', '2026-11-02 06:00:00'],
      ['VARCHAR', '2026-11-02 06:00:00'],
      ['VARCHAR', '30 minutes'],
    ]);
    expect(first.plan.inputs[0]!.window).toEqual({ from: Date.UTC(2026, 10, 2, 5), to: Date.UTC(2026, 10, 2, 6, 30) });
    const moved = await plans.plan(panel('2026-11-04 12:00:00'));
    expect(moved.cached).toBe(true);
    expect(moved.plan.inputs[0]!.window).toEqual({
      from: Date.UTC(2026, 10, 4, 11),
      to: Date.UTC(2026, 10, 4, 12, 30),
    });
    // INTERVAL 2 HOUR's number is parsed into the functions that type it: another span, another plan.
    expect((await plans.plan(panel('2026-11-04 12:00:00', 'INTERVAL 2 HOUR'))).cached).toBe(false);
  });

  it('plans a statement sent again with its literals in, for the owners to keep its scan prepared', async () => {
    const sql = "SELECT status, count(*) AS n FROM events WHERE service = 'kept' AND status >= 500 GROUP BY status";
    const first = await plans.plan(sql);
    expect(first.plan.parameters).toHaveLength(2);
    // Sent again and again: the shape's plan answers at once, and its own is made behind it.
    for (let i = 0; i < 2; i++)
      expect(await plans.plan(sql)).toMatchObject({ cached: true, plan: { parameters: first.plan.parameters } });
    await vi.waitFor(async () => expect((await plans.plan(sql)).plan.parameters).toEqual([]));
    const own = await plans.plan(sql);
    expect(own.cached).toBe(true);
    expect(own.statement).toBe(first.statement);
    expect(own.plan.inputs[0]!.sql).toContain("'kept'");
    expect(own.plan.inputs[0]!.sql).not.toContain('$p');
    // Another value of the shape still takes the shape's plan.
    const other = await plans.plan(sql.replace("'kept'", "'other'"));
    expect(other.plan.parameters.map((p) => p.value)).toEqual(['other', '500']);
  });

  it('never gives one plan to two statements DuckDB reads differently', async () => {
    // DuckDB nests block comments: the first */ here is inside the comment, and ' */ ' is no string.
    const nested = (s: string) => `SELECT length(/* /* */ ' */ '${s}') AS n FROM events`;
    const first = await plans.plan(nested('a b'));
    const wider = await plans.plan(nested('a     b'));
    expect(wider.cached).toBe(false);
    expect(wider.statement).not.toBe(first.statement);
    expect((await plans.plan(nested('a b'))).cached).toBe(true);
    // U+2028 and U+1680 are identifier characters to DuckDB, not white space: two names, two plans.
    const named = (c: string) => `SELECT service AS x${c}y, count(*) FROM events GROUP BY ALL`;
    const line = await plans.plan(named('\u2028'));
    const ogham = await plans.plan(named('\u1680'));
    expect(ogham.cached).toBe(false);
    expect(ogham.plan.columns[0]!.name).toBe('x\u1680y');
    expect(line.plan.columns[0]!.name).toBe('x\u2028y');
    // DuckDB matches names whatever their case, but a string's case is its own, and so is the case
    // an answer's column is named with.
    const cased = (name: string, literal: string) => `SELECT service AS ${name}, '${literal}' AS v FROM events`;
    await plans.plan(cased('svc', 'alpha'));
    expect((await plans.plan(cased('svc', 'Alpha'))).cached).toBe(false);
    const upper = await plans.plan(cased('Svc', 'alpha'));
    expect(upper.cached).toBe(false);
    expect(upper.plan.columns[0]!.name).toBe('Svc');
  });

  it('plans again after a schema change, and the new plan knows the new column', async () => {
    const sql = 'SELECT service, count(*) AS n FROM events GROUP BY service';
    await plans.plan(sql);
    expect((await plans.plan(sql)).cached).toBe(true);
    await expect(plans.plan('SELECT datacenter FROM events')).rejects.toMatchObject({ kind: 'invalid' });

    meta.table = { ...meta.table, columns: [...meta.table.columns, { name: 'datacenter', type: 'VARCHAR' }] };
    const replanned = await plans.plan(sql);
    expect(replanned.cached).toBe(false);
    expect(replanned.plan.tables[0]!.columns.map((c) => c.name)).toContain('datacenter');
    expect(replanned.versions.get('events')!.schema).toBe(schemaDigest('ts', meta.table.columns));
    expect((await plans.plan('SELECT datacenter FROM events')).plan.columns).toEqual([
      { name: 'datacenter', type: 'VARCHAR' },
    ]);
    expect((await plans.plan(sql)).cached).toBe(true);
  });

  it('never keeps a plan whose time window reads the clock', async () => {
    for (const sql of [
      'SELECT count(*) FROM events WHERE ts > now() - INTERVAL 1 HOUR',
      'SELECT count(*) FROM events WHERE ts < current_timestamp',
    ]) {
      const first = await plans.plan(sql);
      expect(first.plan.reusable).toBe(false);
      expect((await plans.plan(sql)).cached).toBe(false);
    }
    expect(
      (await plans.plan("SELECT count(*) FROM events WHERE ts > TIMESTAMP '2026-11-01' - INTERVAL 1 HOUR")).plan
        .reusable,
    ).toBe(true);
  });

  it('answers an unknown table 400 even after the table was known and its plan kept', async () => {
    const sql = 'SELECT count(*) FROM events';
    await plans.plan(sql);
    meta.table = { ...meta.table, name: 'renamed' };
    await expect(plans.plan(sql)).rejects.toMatchObject({ kind: 'invalid', code: 'unknown_table' });
  });
});

describe("the coordinator's catalog", () => {
  it('reads the manifest once, then only what changed when the manifest version moves', async () => {
    const meta = new MemoryMeta();
    const catalog = new TableCatalog(meta);
    meta.commit([segment('a')]);
    const read = async (window?: { from?: number; to?: number }) =>
      (await catalog.segments('events', (await catalog.table('events'))!, window)).segments.map((s) => s.id);
    expect(await read()).toEqual(['a']);
    expect(await read()).toEqual(['a']);
    expect(meta.calls).toMatchObject({ tableVersion: 2, manifestPage: 1, manifestChanges: 0, findTable: 1 });
    // A commit (or a merge's swap) moves the version: the next query reads the change alone.
    meta.commit([segment('a'), segment('b', 86_400_000 * 3)]);
    expect(await read()).toEqual(['b', 'a']);
    expect(await read({ from: 86_400_000 })).toEqual(['b']);
    expect(meta.calls).toMatchObject({ tableVersion: 4, manifestPage: 1, manifestChanges: 1 });
    // A log that no longer reaches back: the manifest is read whole again.
    meta.history.clear();
    meta.commit([segment('c')]);
    expect(await read()).toEqual(['c']);
    expect(meta.calls).toMatchObject({ manifestPage: 2, manifestChanges: 2 });
  });

  it('answers a query over a month or less from a range read while the table’s first read runs', async () => {
    const DAY = 86_400_000;
    const meta = new MemoryMeta();
    const catalog = new TableCatalog(meta);
    meta.commit([segment('a'), segment('b', 3 * DAY), segment('c', 40 * DAY)]);
    let open!: () => void;
    meta.pages = new Promise((resolve) => (open = resolve));
    const read = async (window: { from?: number; to?: number }) =>
      (await catalog.segments('events', (await catalog.table('events'))!, window)).segments.map((s) => s.id);

    // The first read hangs on its pages; a few days are read alone meanwhile, with the table's count.
    const few = await catalog.segments('events', (await catalog.table('events'))!, { from: 2 * DAY, to: 5 * DAY });
    expect({ ids: few.segments.map((s) => s.id), total: few.total }).toEqual({ ids: ['b'], total: 3 });
    expect(meta.calls).toMatchObject({ manifestPage: 1, listSegments: 1, tableStats: 1 });
    // Two months, or no bound at all, wait for the index.
    let wide: string[] | undefined;
    const waiting = read({ from: 0, to: 60 * DAY }).then((ids) => (wide = ids));
    await read({ from: 2 * DAY, to: 5 * DAY });
    expect(wide).toBeUndefined();
    open();
    expect(await waiting).toEqual(['c', 'b', 'a']);
    // Once the index is there, every range is read from it.
    expect(await read({ from: 2 * DAY, to: 5 * DAY })).toEqual(['b']);
    // The table was counted once for both range reads.
    expect(meta.calls).toMatchObject({ manifestPage: 1, listSegments: 2, tableStats: 1 });
  });

  it('waits for the first read when the range read fails', async () => {
    const meta = new MemoryMeta();
    const catalog = new TableCatalog(meta);
    meta.commit([segment('a'), segment('b', 86_400_000)]);
    meta.rangeError = new Error('no answer within 10000 ms');
    const { segments, total } = await catalog.segments('events', (await catalog.table('events'))!, {
      from: 0,
      to: 86_400_000,
    });
    expect({ ids: segments.map((s) => s.id), total }).toEqual({ ids: ['b', 'a'], total: 2 });
    expect(meta.calls).toMatchObject({ manifestPage: 1, listSegments: 1 });
  });

  it('lets queries that arrive together share version checks, each one begun after the query arrived', async () => {
    const meta = new MemoryMeta();
    const catalog = new TableCatalog(meta);
    const first = catalog.table('events');
    // Arrives while the first check is in flight: a change made now must be seen by it.
    meta.manifest = 2;
    const together = await Promise.all([
      catalog.table('events'),
      ...Array.from({ length: 30 }, () => catalog.table('events')),
    ]);
    expect((await first)!.version.manifest).toBe(1);
    expect(together.every((t) => t!.version.manifest === 2)).toBe(true);
    expect(meta.calls.tableVersion).toBe(2);
  });
});

/**
 * The store contract (services/meta/store.ts), held against both stores: SQLite in a temp file and
 * PostgreSQL on the run's real cluster, each test on a database of its own. Concurrency tests open
 * two stores on one database, as two meta replicas do.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { openSqlite } from '../services/common/sqlite.js';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { DomainError } from '../services/common/errors.js';
import { SCHEMA_VERSION } from '../services/meta/migrations.js';
import { openMetaStore } from '../services/meta/open-store.js';
import { SEGMENTS_IN_RANGE_SQL, type MetaStore, type MetaStoreOptions } from '../services/meta/store.js';
import type { ManifestChanges } from '../services/meta/api.js';
import { createdTable, segment, table } from './helpers/meta-fixtures.js';
import { createTestDatabase } from './helpers/postgres.js';

const node = (id: string, group = 'serving', vcpus = 4) => ({
  id,
  group,
  url: `http://127.0.0.1:1/${id}`,
  vcpus,
  startedAt: 1,
});

/** Runs SQL on a store's database behind its back (to look at or damage what the store keeps). */
type RawSql = (sql: string) => Promise<unknown[]>;

interface Implementation {
  name: string;
  /** A new, empty database: its location and a way to run raw SQL on it. */
  fresh(): Promise<{ database: string; raw: RawSql; cleanup(): Promise<void> }>;
}

const implementations: Implementation[] = [
  {
    name: 'SQLite',
    fresh: async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-meta-'));
      const database = path.join(dir, 'meta.sqlite');
      const raw: RawSql = async (sql) => {
        const db = openSqlite(database);
        try {
          const statement = db.prepare(sql);
          return statement.reader ? statement.all() : (statement.run(), []);
        } finally {
          db.close();
        }
      };
      return { database, raw, cleanup: () => rm(dir, { recursive: true, force: true }) };
    },
  },
  {
    name: 'PostgreSQL',
    fresh: async () => {
      const database = await createTestDatabase();
      const raw: RawSql = async (sql) => {
        const client = new pg.Client({ connectionString: database });
        await client.connect();
        try {
          return (await client.query(sql)).rows;
        } finally {
          await client.end();
        }
      };
      return { database, raw, cleanup: async () => {} };
    },
  },
];

describe.each(implementations)('meta store contract on $name', (impl) => {
  let database: string;
  let raw: RawSql;
  let cleanup: () => Promise<void>;
  let clock: number;
  let store: MetaStore;
  const opened: MetaStore[] = [];
  const open = async (extra: MetaStoreOptions = {}) => {
    const s = await openMetaStore({ database, now: () => clock, ...extra });
    opened.push(s);
    return s;
  };

  beforeEach(async () => {
    ({ database, raw, cleanup } = await impl.fresh());
    clock = 1_000_000;
    store = await open();
    await store.ensureTable(table);
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((s) => s.close().catch(() => {})));
    await cleanup();
  });

  describe('nodes', () => {
    it('drops a node from its group’s members after 30 s of silence, and shows it dead in the backends view', async () => {
      await store.registerNode(node('n1'));
      await store.registerNode(node('n2', 'serving', 2));
      await store.registerNode(node('h1', 'heavy', 8));
      clock += 25_000;
      expect(await store.heartbeat('n1', 6)).toBe(true);
      clock += 10_000;
      expect(await store.members('serving')).toEqual([{ id: 'n1', url: 'http://127.0.0.1:1/n1', weight: 6 }]);
      const n2 = (await store.backends('serving')).find((b) => b.id === 'n2')!;
      expect(n2).toEqual({
        id: 'n2',
        group: 'serving',
        url: 'http://127.0.0.1:1/n2',
        cpuCores: 2,
        alive: false,
        lastStartTime: new Date(1).toISOString(),
        lastHeartbeat: new Date(1_000_000).toISOString(),
        heartbeatFailures: 6,
      });
      expect((await store.backends()).map((b) => [b.group, b.id, b.alive])).toEqual([
        ['heavy', 'h1', false],
        ['serving', 'n1', true],
        ['serving', 'n2', false],
      ]);
    });

    it('drops a node that leaves on purpose at once, and refuses heartbeats from nodes it does not know', async () => {
      await store.registerNode(node('n1'));
      expect(await store.deregisterNode('n1')).toBe(true);
      expect(await store.members('serving')).toEqual([]);
      expect(await store.deregisterNode('n1')).toBe(false);
      expect(await store.heartbeat('n1', 4)).toBe(false);
    });

    it('takes a restarted node’s new start time, address and weight on re-registration', async () => {
      await store.registerNode(node('n1'));
      clock += 60_000;
      await store.registerNode({ ...node('n1', 'serving', 3), url: 'http://127.0.0.1:2', startedAt: clock });
      expect(await store.members('serving')).toEqual([{ id: 'n1', url: 'http://127.0.0.1:2', weight: 3 }]);
      expect((await store.backends())[0]).toMatchObject({
        lastStartTime: new Date(clock).toISOString(),
        alive: true,
        heartbeatFailures: 0,
      });
    });

    it('keeps time by the database’s clock when none is injected', async () => {
      const real = await open({ now: undefined });
      await real.registerNode(node('n1'));
      expect((await real.members('serving')).map((m) => m.id)).toEqual(['n1']);
      const [backend] = await real.backends();
      expect(Math.abs(Date.parse(backend!.lastHeartbeat) - Date.now())).toBeLessThan(60_000);
    });
  });

  describe('tables and segments', () => {
    it('creates a table once and refuses another timestamp column for it', async () => {
      expect(await store.ensureTable({ ...table, columns: [{ name: 'other', type: 'INT' }] })).toEqual(createdTable);
      await expect(store.ensureTable({ ...table, timestampColumn: 'time' })).rejects.toThrow(
        /keeps its timestamps in "ts"/,
      );
      await store.ensureTable({
        name: 'logs',
        timestampColumn: 'at',
        columns: [
          { name: 'at', type: 'TIMESTAMP' },
          { name: 'msg', type: 'VARCHAR' },
        ],
      });
      expect((await store.listTables()).map((t) => t.name)).toEqual(['events', 'logs']);
      expect(await store.getTable('logs')).toEqual({
        name: 'logs',
        timestampColumn: 'at',
        incarnation: 1,
        columns: [
          { name: 'at', type: 'TIMESTAMP' },
          { name: 'msg', type: 'VARCHAR' },
        ],
      });
      expect(await store.getTable('nope')).toBeUndefined();
    });

    it('keeps a table without a timestamp column as one, and refuses to give it one later', async () => {
      const owners = { name: 'owners', timestampColumn: null, columns: [{ name: 'service', type: 'VARCHAR' }] };
      expect(await store.ensureTable(owners)).toEqual({ ...owners, incarnation: 1 });
      expect(await store.getTable('owners')).toEqual({ ...owners, incarnation: 1 });
      expect((await store.listTables()).find((t) => t.name === 'owners')).toEqual({ ...owners, incarnation: 1 });
      await expect(store.ensureTable({ ...owners, timestampColumn: 'ts' })).rejects.toThrow(
        /table "owners" has no timestamp column, not "ts"/,
      );
      await expect(store.ensureTable({ ...table, timestampColumn: null })).rejects.toThrow(
        /keeps its timestamps in "ts": it is not a table without one/,
      );
      expect((await store.tableVersion('owners'))!.schema).not.toBe((await store.tableVersion('events'))!.schema);
    });

    it('changes only the types of a table’s columns, once, and only while it has the columns the change was made against', async () => {
      const from = [
        { name: 'ts', type: 'TIMESTAMP' },
        { name: 's', type: 'STRUCT(id HUGEINT)' },
        { name: 'x', type: 'HUGEINT' },
      ];
      const to = [from[0]!, { name: 's', type: 'STRUCT(id DOUBLE)' }, { name: 'x', type: 'DOUBLE' }];
      const legacy = { name: 'legacy', timestampColumn: 'ts', columns: from };
      await store.ensureTable(legacy);
      await store.commitSegment(segment('l1', { table: 'legacy' }));
      const before = (await store.tableVersion('legacy'))!;

      expect(await store.setColumnTypes('legacy', from, to)).toEqual({ ...legacy, columns: to, incarnation: 1 });
      expect(await store.getTable('legacy')).toEqual({ ...legacy, columns: to, incarnation: 1 });
      expect((await store.listTables()).find((t) => t.name === 'legacy')).toEqual({
        ...legacy,
        columns: to,
        incarnation: 1,
      });
      // Readers' cached schemas go stale with the schema digest; the segments did not change.
      const after = (await store.tableVersion('legacy'))!;
      expect(after.schema).not.toBe(before.schema);
      expect(after.manifest).toBe(before.manifest);
      expect((await store.listSegments('legacy')).map((s) => s.id)).toEqual(['l1']);

      // The same change again (another worker, a retried call) is a no-op.
      expect(await store.setColumnTypes('legacy', from, to)).toEqual({ ...legacy, columns: to, incarnation: 1 });
      expect((await store.tableVersion('legacy'))!).toEqual(after);
      // A change decided on columns the table no longer has does not land.
      await expect(
        store.setColumnTypes('legacy', from, [from[0]!, from[1]!, { name: 'x', type: 'BIGINT' }]),
      ).rejects.toMatchObject({ kind: 'conflict', code: 'table_changed' });
      // Names and order stay as they are.
      await expect(store.setColumnTypes('legacy', to, [to[1]!, to[0]!, to[2]!])).rejects.toMatchObject({
        kind: 'invalid',
        code: 'only_types_change',
      });
      await expect(store.setColumnTypes('legacy', to, to.slice(0, 2))).rejects.toMatchObject({
        code: 'only_types_change',
      });
      expect((await store.getTable('legacy'))!.columns).toEqual(to);
      await expect(store.setColumnTypes('nope', from, to)).rejects.toMatchObject({
        kind: 'not_found',
        code: 'table_not_found',
      });
      // Kept when the store is opened again.
      expect((await (await open()).getTable('legacy'))!.columns).toEqual(to);
    });

    it('adds the columns a table lacks, at its end, once, and leaves a column it has as it is', async () => {
      const logs = { name: 'logs', timestampColumn: 'ts', columns: [{ name: 'ts', type: 'TIMESTAMP' }] };
      await store.ensureTable(logs);
      await store.commitSegment(segment('g1', { table: 'logs' }));
      const before = (await store.tableVersion('logs'))!;
      const added = [
        { name: 'a', type: 'BIGINT' },
        { name: 'b', type: 'VARCHAR' },
      ];
      const evolved = [...logs.columns, ...added];
      expect(await store.addColumns('logs', added)).toEqual({ ...logs, columns: evolved, incarnation: 1 });
      // Readers' cached schemas and plans go stale with the digest; the manifest did not move.
      const after = (await store.tableVersion('logs'))!;
      expect(after.schema).not.toBe(before.schema);
      expect(after.manifest).toBe(before.manifest);
      // Again, or with a type of its own, or in another case: the column stays as it was added first.
      expect(await store.addColumns('logs', added)).toEqual({ ...logs, columns: evolved, incarnation: 1 });
      expect(await store.addColumns('logs', [{ name: 'A', type: 'DOUBLE' }])).toEqual({
        ...logs,
        columns: evolved,
        incarnation: 1,
      });
      expect((await store.tableVersion('logs'))!).toEqual(after);
      await expect(store.addColumns('nope', added)).rejects.toMatchObject({
        kind: 'not_found',
        code: 'table_not_found',
      });
      expect((await (await open()).getTable('logs'))!.columns).toEqual(evolved);
    });

    it('keeps a retention period per table until it is set to null, and lists the tables that have one', async () => {
      await store.ensureTable({ ...table, name: 'other' });
      expect(await store.retentions()).toEqual([]);
      await store.setRetention('other', 86_400_000);
      await store.setRetention('events', 30 * 86_400_000);
      await store.setRetention('events', 7 * 86_400_000);
      expect(await store.retentions()).toEqual([
        { table: 'events', retentionMs: 7 * 86_400_000 },
        { table: 'other', retentionMs: 86_400_000 },
      ]);
      await store.setRetention('other', null);
      expect(await (await open()).retentions()).toEqual([{ table: 'events', retentionMs: 7 * 86_400_000 }]);
      // The table itself is as it was.
      expect(await store.getTable('events')).toEqual(createdTable);
      await expect(store.setRetention('nope', 1)).rejects.toMatchObject({ kind: 'not_found', code: 'table_not_found' });
    });

    it('drops a table from every reader at once, retires its segments in batches, then creates the name anew and empty', async () => {
      for (const id of ['d1', 'd2', 'd3']) await store.commitSegment(segment(id, { incarnation: 1 }));
      await store.setRetention('events', 86_400_000);
      const before = (await store.tableVersion('events'))!;
      await store.dropTable('events', 1);
      await store.dropTable('events', 1); // a repeat is a no-op
      expect(await store.getTable('events')).toBeUndefined();
      expect(await store.tableVersion('events')).toBeUndefined();
      expect(await store.listTables()).toEqual([]);
      expect(await store.retentions()).toEqual([]);
      expect(await store.tableStats('events')).toBeUndefined();
      await expect(store.commitSegment(segment('late', { incarnation: 1 }))).rejects.toMatchObject({
        code: 'table_not_found',
      });
      await expect(store.addColumns('events', [{ name: 'x', type: 'INT' }])).rejects.toMatchObject({
        code: 'table_not_found',
      });
      // Its segments are still active until the drop retires them: the name waits until then.
      expect(await store.drops()).toEqual([{ table: 'events', incarnation: 1, droppedAt: clock }]);
      await expect(store.ensureTable(table)).rejects.toMatchObject({ kind: 'conflict', code: 'table_dropping' });

      clock += 1;
      expect(await store.retireDropped('events', 1, 2)).toEqual({ segments: 2, rows: 20, bytes: 200, more: true });
      expect(await store.retireDropped('events', 1, 2)).toEqual({ segments: 1, rows: 10, bytes: 100, more: false });
      expect(await store.retireDropped('events', 1, 2)).toEqual({ segments: 0, rows: 0, bytes: 0, more: false });
      expect(await store.drops()).toEqual([]);
      // Retired like any other: the janitor deletes their objects after its grace time.
      expect((await store.listRetired(clock + 1, 1_000)).map((s) => s.id).sort()).toEqual(['d1', 'd2', 'd3']);

      const columns = [
        { name: 'ts', type: 'TIMESTAMP' },
        { name: 'other', type: 'VARCHAR' },
      ];
      expect(await store.ensureTable({ ...table, columns })).toEqual({ ...table, columns, incarnation: 2 });
      expect(await store.ensureTable(table)).toEqual({ ...table, columns, incarnation: 2 });
      expect(await store.listSegments('events')).toEqual([]);
      expect(await store.retentions()).toEqual([]);
      expect((await store.tableVersion('events'))!.manifest).toBeGreaterThan(before.manifest);
      // The dropped incarnation's ids stay known (the dedup window), and nothing written for it lands in this one.
      expect(await store.knownSegments(['d1', 'late'])).toEqual(['d1']);
      await expect(store.commitSegment(segment('late', { incarnation: 1 }))).rejects.toMatchObject({
        kind: 'conflict',
        code: 'table_recreated',
      });
      await store.commitSegment(segment('new', { incarnation: 2 }));
      // An old drop repeated leaves the new incarnation alone; retiring for it finds nothing.
      await store.dropTable('events', 1);
      expect(await store.retireDropped('events', 1, 10)).toEqual({ segments: 0, rows: 0, bytes: 0, more: false });
      expect((await store.listSegments('events')).map((s) => s.id)).toEqual(['new']);
      await expect(store.retireDropped('events', 2, 10)).rejects.toMatchObject({ code: 'table_not_dropped' });
      await expect(store.dropTable('events', 3)).rejects.toMatchObject({ code: 'table_not_found' });
      await expect(store.dropTable('nope', 1)).rejects.toMatchObject({ code: 'table_not_found' });
    });

    it("sums a table's active segments alone, and knows no stats of a table that does not exist", async () => {
      expect(await store.tableStats('events')).toEqual({ segments: 0, rows: 0, bytes: 0, oldest: null, newest: null });
      await store.commitSegment(segment('t1', { minTs: 1_000, maxTs: 5_000, rows: 10, bytes: 100 }));
      await store.commitSegment(segment('t2', { minTs: 3_000, maxTs: 9_000, rows: 20, bytes: 300 }));
      await store.commitSegment(segment('t3', { minTs: 500, maxTs: 600, rows: 5, bytes: 50 }));
      await store.retireSegments(['t3']);
      expect(await store.tableStats('events')).toEqual({
        segments: 2,
        rows: 30,
        bytes: 400,
        oldest: 1_000,
        newest: 9_000,
      });
      expect(await store.tableStats('nope')).toBeUndefined();
    });

    it('lists active segments whose time range overlaps the asked range, newest first', async () => {
      await store.commitSegment(segment('early', { minTs: 0, maxTs: 99 }));
      await store.commitSegment(segment('late', { minTs: 200, maxTs: 299 }));
      await store.commitSegment(segment('gone', { minTs: 100, maxTs: 199 }));
      await store.retireSegments(['gone']);
      expect((await store.listSegments('events', { from: 100, to: 250 })).map((s) => s.id)).toEqual(['late']);
      expect((await store.listSegments('events', { to: 99 })).map((s) => s.id)).toEqual(['early']);
      expect((await store.listSegments('events')).map((s) => s.id)).toEqual(['late', 'early']);
      expect(await store.listSegments('nope')).toEqual([]);
    });

    it('commits a segment once: the same commit again is a no-op, a different one under its id a conflict, an unknown table a 404', async () => {
      const first = await store.commitSegment(segment('s1'));
      expect(first).toEqual({ ...segment('s1'), state: 'active', createdAt: clock, retiredAt: null, replacedBy: null });
      clock += 1;
      expect(await store.commitSegment(segment('s1'))).toEqual(first);
      expect(await store.listSegments('events')).toHaveLength(1);
      await expect(store.commitSegment(segment('s1', { rows: 11 }))).rejects.toThrow(
        /already committed with different contents/,
      );
      await expect(store.commitSegment(segment('s2', { table: 'nope' }))).rejects.toMatchObject({
        kind: 'not_found',
        code: 'table_not_found',
      });
    });

    it('swaps inputs for a merged segment atomically, once, and lets only one of two racing swaps win', async () => {
      for (const id of ['a', 'b', 'c']) await store.commitSegment(segment(id));
      await store.swapSegments(['a', 'b'], segment('m1', { level: 1, rows: 20 }));
      expect((await store.listSegments('events')).map((s) => s.id).sort()).toEqual(['c', 'm1']);
      expect(await store.getSegment('a')).toMatchObject({ state: 'retired', replacedBy: 'm1', retiredAt: clock });
      // Repeating the same swap (a retried activity) changes nothing.
      await store.swapSegments(['a', 'b'], segment('m1', { level: 1, rows: 20 }));
      expect((await store.listSegments('events')).map((s) => s.id).sort()).toEqual(['c', 'm1']);
      // A second merge over an input already merged loses, and leaves nothing behind.
      await expect(store.swapSegments(['b', 'c'], segment('m2', { level: 1 }))).rejects.toThrow(
        /already retired by "m1"/,
      );
      expect(await store.getSegment('m2')).toBeUndefined();
      expect((await store.getSegment('c'))?.state).toBe('active');
      await expect(store.swapSegments(['c', 'ghost'], segment('m3'))).rejects.toMatchObject({
        code: 'segment_not_found',
      });
      expect((await store.getSegment('c'))?.state).toBe('active');
    });

    it('retires, lists and forgets retired segments, never an active one', async () => {
      for (const id of ['a', 'b']) await store.commitSegment(segment(id));
      await expect(store.retireSegments(['a', 'ghost'])).rejects.toMatchObject({ code: 'segment_not_found' });
      expect((await store.getSegment('a'))?.state).toBe('active');
      await store.retireSegments(['a']);
      clock += 1_000;
      await store.retireSegments(['a']); // already retired: stays as it was
      expect((await store.getSegment('a'))?.retiredAt).toBe(clock - 1_000);
      expect((await store.listRetired(clock, 1_000)).map((s) => s.id)).toEqual(['a']);
      expect(await store.listRetired(clock - 1_000, 1_000)).toEqual([]);
      await expect(store.forgetSegments(['b'])).rejects.toMatchObject({ kind: 'conflict', code: 'segment_active' });
      await store.forgetSegments(['a']);
      await store.forgetSegments(['a']);
      // Its object is gone, its row stays for the dedup window: known, never listed again.
      expect(await store.knownSegments(['b', 'a', 'x'])).toEqual(['b', 'a']);
      expect(await store.listRetired(clock + 1, 1_000)).toEqual([]);
    });

    it('lists retired segments a page at a time, oldest retirement first, and forgets a page in one call', async () => {
      for (const id of ['p1', 'p2', 'p3', 'p4', 'q']) await store.commitSegment(segment(id));
      await store.retireSegments(['p3', 'p1']);
      clock += 1_000;
      await store.retireSegments(['p2', 'p4']);
      expect((await store.listRetired(clock + 1, 3)).map((s) => s.id)).toEqual(['p1', 'p3', 'p2']);
      await expect(store.forgetSegments(['p1', 'q'])).rejects.toMatchObject({ code: 'segment_active' });
      expect((await store.listRetired(clock + 1, 3)).map((s) => s.id)).toEqual(['p1', 'p3', 'p2']); // none forgotten
      await store.forgetSegments(['p1', 'p3', 'p2']);
      expect((await store.listRetired(clock + 1, 3)).map((s) => s.id)).toEqual(['p4']);
      await store.forgetSegments(['p4']);
      expect(await store.listRetired(clock + 1, 3)).toEqual([]);
    });

    it('keeps a forgotten segment’s row for the dedup window: its id commits as a no-op, then it is purged and commits anew', async () => {
      const windowed = await open({ dedupWindowMs: 10_000 });
      for (const id of ['a', 'b', 'c']) await windowed.commitSegment(segment(id));
      await windowed.swapSegments(['a', 'b'], segment('m1', { level: 1, rows: 20 }));
      const retiredAt = clock;
      clock += 1_000;
      expect((await windowed.listRetired(clock, 1_000)).map((s) => s.id)).toEqual(['a', 'b']);
      for (const id of ['a', 'b']) await windowed.forgetSegments([id]);
      expect(await windowed.listRetired(clock, 1_000)).toEqual([]);
      const version = (await windowed.tableVersion('events'))!.manifest;

      // The batch sent again: answered with the row committed first, still retired; nothing moves.
      const again = await windowed.commitSegment(segment('a'));
      expect(again).toEqual({
        ...segment('a'),
        state: 'retired',
        createdAt: retiredAt,
        retiredAt,
        replacedBy: 'm1',
      });
      await expect(windowed.commitSegment(segment('a', { rows: 11 }))).rejects.toMatchObject({
        kind: 'conflict',
        code: 'segment_exists',
      });
      expect((await windowed.listSegments('events')).map((s) => s.id).sort()).toEqual(['c', 'm1']);
      expect((await windowed.tableVersion('events'))!.manifest).toBe(version);
      // Its upload (made before the commit) may have brought the object back: the janitor's again.
      expect((await windowed.listRetired(clock, 1_000)).map((s) => s.id)).toEqual(['a']);
      await windowed.forgetSegments(['a']);

      // Within the window nothing is purged.
      clock = retiredAt + 10_000;
      expect(await windowed.purgeRetired(100)).toBe(0);
      expect(await windowed.knownSegments(['a', 'b'])).toEqual(['a', 'b']);
      clock += 1;
      expect(await windowed.purgeRetired(1)).toBe(1);
      expect(await windowed.purgeRetired(100)).toBe(1);
      expect(await windowed.purgeRetired(100)).toBe(0);
      expect(await windowed.knownSegments(['a', 'b', 'c', 'm1'])).toEqual(['c', 'm1']);
      expect((await windowed.tableVersion('events'))!.manifest).toBe(version);

      // Past the window the same batch is new again.
      expect(await windowed.commitSegment(segment('a'))).toMatchObject({ state: 'active', createdAt: clock });
      expect((await windowed.listSegments('events')).map((s) => s.id).sort()).toEqual(['a', 'c', 'm1']);
    });

    it('never purges a retired row whose object the janitor has not deleted, however old, nor an active one', async () => {
      const windowed = await open({ dedupWindowMs: 1_000 });
      for (const id of ['a', 'b']) await windowed.commitSegment(segment(id));
      await windowed.retireSegments(['a']);
      clock += 1_000_000;
      expect(await windowed.purgeRetired(100)).toBe(0);
      expect((await windowed.listRetired(clock, 1_000)).map((s) => s.id)).toEqual(['a']);
      await windowed.forgetSegments(['a']);
      expect(await windowed.purgeRetired(100)).toBe(1);
      expect(await windowed.knownSegments(['a', 'b'])).toEqual(['b']);
    });

    it('reads the active listing and each janitor listing through an index that holds none of the kept rows', async () => {
      // 20,000 kept rows (retired, objects gone) beside a few active ones, as after a week of merges.
      const series =
        impl.name === 'SQLite'
          ? 'WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 20000) SELECT'
          : 'SELECT';
      const from = impl.name === 'SQLite' ? 'FROM g' : 'FROM generate_series(1, 20000) AS g(n)';
      const insert = `INSERT INTO segments (id, tbl, min_ts, max_ts, rows, bytes, level, state, created_at, retired_at, object_deleted_at)
         ${series} 'kept-' || n, 'events', 0, 1000, 10, 100, 0, 'retired', n, n, n ${from}`;
      // PostgreSQL: without the manifest version's trigger, which would update one row 20,000 times.
      await raw(
        impl.name === 'SQLite'
          ? insert
          : `ALTER TABLE segments DISABLE TRIGGER segments_added; ${insert}; ALTER TABLE segments ENABLE TRIGGER segments_added`,
      );
      for (const id of ['a', 'b']) await store.commitSegment(segment(id));
      await raw('ANALYZE');
      const plan = async (sql: string) =>
        (await raw(`${impl.name === 'SQLite' ? 'EXPLAIN QUERY PLAN' : 'EXPLAIN'} ${sql}`))
          .map((r) => Object.values(r as Record<string, unknown>).join(' '))
          .join('\n');
      expect(
        await plan(
          `SELECT * FROM segments WHERE tbl = 'events' AND state = 'active' AND max_ts >= 0 AND min_ts <= 10 ORDER BY max_ts DESC, id`,
        ),
      ).toMatch(/segments_by_table/);
      expect(
        await plan(
          `SELECT * FROM segments WHERE state = 'retired' AND object_deleted_at IS NULL AND retired_at < 30000 ORDER BY retired_at, id LIMIT 1000`,
        ),
      ).toMatch(/segments_retired_with_objects/);
      expect(
        await plan(`SELECT id FROM segments WHERE object_deleted_at IS NOT NULL AND retired_at < 100 LIMIT 1000`),
      ).toMatch(/segments_retired_without_objects/);
      expect((await store.listSegments('events')).map((s) => s.id)).toEqual(['a', 'b']);
      expect(await store.listRetired(Number.MAX_SAFE_INTEGER, 1_000)).toEqual([]);
    });

    it('keeps the window a week by default', async () => {
      await store.commitSegment(segment('a'));
      await store.retireSegments(['a']);
      await store.forgetSegments(['a']);
      clock += 7 * 24 * 3_600_000;
      expect(await store.purgeRetired(100)).toBe(0);
      clock += 1;
      expect(await store.purgeRetired(100)).toBe(1);
    });

    it('takes each removal of a delete once, retiring the segment and adding its replacement in the same write', async () => {
      for (const id of ['a', 'b', 'c']) await store.commitSegment(segment(id));
      const task = await store.requestDelete('events', { incarnation: 1, predicate: 'SELECT 1', to: 500 });
      expect(task).toMatchObject({ table: 'events', from: null, to: 500, requestedAt: clock, finishedAt: null });
      expect(await store.pendingDeletes()).toEqual([task]);
      const a = { segment: 'a', removed: 4, replacement: segment('a2', { rows: 6 }) };
      await store.removeRows(task.id, a);
      await store.removeRows(task.id, a); // a retry whose answer was lost: no change
      await store.removeRows(task.id, { segment: 'b', removed: 10 });
      expect((await store.listSegments('events')).map((s) => s.id)).toEqual(['a2', 'c']);
      expect(await store.getSegment('a')).toMatchObject({ state: 'retired', replacedBy: 'a2' });
      expect(await store.getSegment('b')).toMatchObject({ state: 'retired', replacedBy: null });
      expect(await store.deleteReport(task.id)).toMatchObject({ finishedAt: null, segmentsRewritten: 1 });

      // A segment a merge took first: refused, and nothing of the removal is kept.
      await store.swapSegments(['c'], segment('m', { level: 1 }));
      await expect(
        store.removeRows(task.id, { segment: 'c', removed: 1, replacement: segment('c2') }),
      ).rejects.toMatchObject({ code: 'segment_retired' });
      expect(await store.getSegment('c2')).toBeUndefined();
      await expect(store.removeRows(task.id + 1, { segment: 'm', removed: 1 })).rejects.toMatchObject({
        code: 'delete_not_found',
      });

      const report = await store.finishDelete(task.id);
      expect(report).toEqual({
        ...task,
        finishedAt: clock,
        rowsRemoved: 14,
        segmentsRewritten: 1,
        segmentsRetired: 1,
        perSegment: [
          { segment: 'a', removed: 4, replacedBy: 'a2' },
          { segment: 'b', removed: 10, replacedBy: null },
        ],
      });
      expect(await store.pendingDeletes()).toEqual([]);
      clock += 1;
      expect(await store.finishDelete(task.id)).toEqual(report); // the first finish stands
      await expect(store.removeRows(task.id, { segment: 'm', removed: 1 })).rejects.toMatchObject({
        code: 'delete_finished',
      });
      // Only the table's living incarnation takes a delete.
      await expect(store.requestDelete('events', { incarnation: 2, predicate: 'SELECT 1' })).rejects.toMatchObject({
        code: 'table_not_found',
      });
    });

    it('answers what changed since a version, and the manifest as of one version page by page', async () => {
      for (const id of ['a', 'b', 'c']) await store.commitSegment(segment(id));
      const v1 = (await store.tableVersion('events'))!.manifest;
      expect(await store.manifestChanges('events', 0, 100)).toMatchObject({
        version: v1,
        incarnation: 1,
        added: ['a', 'b', 'c'].map((id) => expect.objectContaining({ id })),
        retired: [],
      });
      await store.swapSegments(['a', 'b'], segment('m', { level: 1, rows: 20 }));
      await store.retireSegments(['c']);
      await store.commitSegment(segment('d'));
      await store.commitSegment(segment('e'));
      await store.retireSegments(['e']); // added and gone since v1: in neither list
      const now = (await store.tableVersion('events'))!.manifest;
      const changes = await store.manifestChanges('events', v1, 100);
      expect(changes).toMatchObject({ version: now, retired: ['a', 'b', 'c'] });
      expect((changes as ManifestChanges).added.map((s) => s.id)).toEqual(['m', 'd']);
      expect(await store.manifestChanges('events', now, 100)).toMatchObject({ version: now, added: [], retired: [] });
      expect(await store.manifestChanges('events', v1, 4)).toBe('snapshot'); // more changes than asked for
      expect(await store.manifestChanges('nope', 0, 100)).toBeUndefined();

      // Pages of one version make that version's manifest, whatever changed since.
      const first = (await store.manifestPage('events', v1, undefined, 2))!;
      expect(first).toMatchObject({ version: v1, next: 'b' });
      const second = (await store.manifestPage('events', v1, first.next, 2))!;
      expect([...first.segments, ...second.segments].map((s) => s.id)).toEqual(['a', 'b', 'c']);
      expect(second.next).toBeUndefined();
      expect((await store.manifestPage('events', undefined, undefined, 10))!).toMatchObject({
        version: now,
        segments: [{ id: 'd' }, { id: 'm' }],
      });

      // Purging retired rows past the dedup window takes their retirements out of the log.
      const windowed = await open({ dedupWindowMs: 1 });
      for (const id of ['a', 'b', 'c', 'e']) await windowed.forgetSegments([id]);
      clock += 10;
      expect(await windowed.purgeRetired(100)).toBe(4);
      expect(await windowed.manifestChanges('events', v1, 100)).toBe('snapshot');
      expect(await windowed.manifestChanges('events', now, 100)).toMatchObject({ added: [], retired: [] });
    });

    it('lists a time range through both bounds of an index, wide segments apart', async () => {
      const day = 86_400_000;
      await store.commitSegment(segment('old', { minTs: 0, maxTs: day - 1 }));
      await store.commitSegment(segment('recent', { minTs: 40 * day, maxTs: 40 * day + 1000 }));
      await store.commitSegment(segment('wide', { minTs: 0, maxTs: 50 * day }));
      const ids = async (from: number, to: number) =>
        (await store.listSegments('events', { from, to })).map((s) => s.id).sort();
      expect(await ids(40 * day, 41 * day)).toEqual(['recent', 'wide']);
      expect(await ids(0, 10)).toEqual(['old', 'wide']);
      expect(await ids(51 * day, 60 * day)).toEqual([]);
      expect((await store.listSegments('events')).map((s) => s.id).sort()).toEqual(['old', 'recent', 'wide']);
      const explain = impl.name === 'SQLite' ? 'EXPLAIN QUERY PLAN' : 'EXPLAIN';
      const plan = (
        await raw(
          `${explain} ${(impl.name === 'SQLite'
            ? SEGMENTS_IN_RANGE_SQL.replace(/\$(\d)/g, '?$1')
            : SEGMENTS_IN_RANGE_SQL
          )
            .replace('$1', "'events'")
            .replace(/\?1/g, "'events'")
            .replace(/[$?]2/g, String(40 * day))
            .replace(/[$?]3/g, String(41 * day))
            .replace(/[$?]4/g, String(39 * day))
            .replace(/\$1/g, "'events'")}`,
        )
      )
        .map((r) => Object.values(r as Record<string, unknown>).join(' '))
        .join('\n');
      expect(plan).toMatch(/segments_narrow/);
      expect(plan).toMatch(/segments_wide/);
    });

    it("moves a table's manifest version on every change to its active segments, and only then", async () => {
      const versions: number[] = [];
      const version = async () => versions.push((await store.tableVersion('events'))!.manifest);
      await version();
      for (const id of ['a', 'b', 'c']) await store.commitSegment(segment(id));
      await version();
      await store.commitSegment(segment('a')); // the same commit again: no change
      await store.listSegments('events');
      await version();
      await store.swapSegments(['a', 'b'], segment('m1', { level: 1, rows: 20 }));
      await version();
      await store.swapSegments(['a', 'b'], segment('m1', { level: 1, rows: 20 })); // repeated: no change
      await version();
      await store.retireSegments(['c']);
      await version();
      await store.forgetSegments(['a']); // retired already: the active set stays
      await version();
      expect(versions.slice(1).map((v, i) => v > versions[i]!)).toEqual([true, false, true, false, true, false]);
      // Another table's changes leave this one's version alone; the schema digest is the schema's.
      await store.ensureTable({ name: 'logs', timestampColumn: 'at', columns: [{ name: 'at', type: 'TIMESTAMP' }] });
      await store.commitSegment(segment('l1', { table: 'logs' }));
      expect((await store.tableVersion('events'))!.manifest).toBe(versions.at(-1));
      expect((await store.tableVersion('events'))!.schema).not.toBe((await store.tableVersion('logs'))!.schema);
      expect(await store.tableVersion('nope')).toBeUndefined();
    });
  });

  describe('leases', () => {
    it('grants a lease to one holder at a time until it expires or is released', async () => {
      expect((await store.acquireLease('merge:events:p1', 'w1', 10_000)).granted).toBe(true);
      expect(await store.acquireLease('merge:events:p1', 'w2', 10_000)).toMatchObject({
        granted: false,
        lease: { holder: 'w1', expiresAt: clock + 10_000 },
      });
      expect((await store.acquireLease('merge:events:p1', 'w1', 10_000)).granted).toBe(true);
      clock += 10_001;
      expect((await store.acquireLease('merge:events:p1', 'w2', 10_000)).granted).toBe(true);
      expect(await store.releaseLease('merge:events:p1', 'w1')).toBe(false);
      expect(await store.releaseLease('merge:events:p1', 'w2')).toBe(true);
      await store.acquireLease('compaction:y', 'heavy', 60_000);
      await store.acquireLease('compaction:x', 'heavy', 60_000);
      await store.acquireLease('other', 'someone', 60_000);
      expect(await store.releaseLeasesOf('heavy')).toEqual(['compaction:x', 'compaction:y']);
      expect((await store.listLeases()).map((l) => l.name)).toEqual(['other']);
      clock += 60_000;
      expect(await store.listLeases()).toEqual([]);
    });

    it('gives a new, larger fencing token whenever a lease changes hands, and keeps it while its holder renews', async () => {
      const first = (await store.acquireLease('L', 'w1', 1_000)).lease.token;
      expect((await store.acquireLease('L', 'w1', 1_000)).lease.token).toBe(first);
      clock += 5_000; // expired, but nobody took it: renewing keeps the token
      expect((await store.acquireLease('L', 'w1', 1_000)).lease.token).toBe(first);
      clock += 5_000;
      const second = (await store.acquireLease('L', 'w2', 1_000)).lease.token;
      expect(second).toBeGreaterThan(first);
      await store.releaseLease('L', 'w2');
      const third = (await store.acquireLease('L', 'w2', 1_000)).lease.token;
      expect(third).toBeGreaterThan(second);
      expect((await store.acquireLease('other', 'w1', 1_000)).lease.token).toBeGreaterThan(third);
    });

    it('commits a fenced swap only while the lease still carries its token', async () => {
      for (const id of ['a', 'b', 'c', 'd']) await store.commitSegment(segment(id));
      const stale = (await store.acquireLease('merge:events', 'w1', 1_000)).lease.token;
      clock += 2_000; // w1 stalls past its lease; w2 takes over
      const current = (await store.acquireLease('merge:events', 'w2', 60_000)).lease.token;
      const lost = store.swapSegments(['a', 'b'], segment('m-w1'), { lease: 'merge:events', token: stale });
      await expect(lost).rejects.toMatchObject({ kind: 'conflict', code: 'lease_lost' });
      await expect(lost).rejects.toThrow(/held by "w2"/);
      expect(await store.getSegment('m-w1')).toBeUndefined();
      expect((await store.getSegment('a'))?.state).toBe('active');

      await store.swapSegments(['a', 'b'], segment('m-w2'), { lease: 'merge:events', token: current });
      expect((await store.getSegment('a'))?.replacedBy).toBe('m-w2');
      // Its retry after the lease is released is still the same no-op.
      await store.releaseLease('merge:events', 'w2');
      await store.swapSegments(['a', 'b'], segment('m-w2'), { lease: 'merge:events', token: current });
      // A fenced swap without its lease commits nothing.
      await expect(
        store.swapSegments(['c', 'd'], segment('m3'), { lease: 'merge:events', token: current }),
      ).rejects.toThrow(/is not held/);
      expect((await store.getSegment('c'))?.state).toBe('active');
    });
  });

  describe('across replicas', () => {
    it('keeps nodes, tables, segments and leases when the store is opened again', async () => {
      await store.registerNode(node('n1'));
      await store.commitSegment(segment('s1'));
      const { lease } = await store.acquireLease('merge:events:2026-11-30', 'worker-1', 60_000);
      await store.close();
      store = await open();
      expect((await store.members('serving')).map((m) => m.id)).toEqual(['n1']);
      expect((await store.listSegments('events')).map((s) => s.id)).toEqual(['s1']);
      expect(await store.getLease('merge:events:2026-11-30')).toEqual(lease);
    });

    it('lands every column of many batches adding fields at once, from two replicas, each name once', async () => {
      const other = await open();
      // Batch i adds c<i> and c<i+1>: neighbours race to add the same column.
      const adds = Array.from({ length: 12 }, (_, i) =>
        (i % 2 === 0 ? store : other).addColumns('events', [
          { name: `c${i}`, type: 'BIGINT' },
          { name: `c${i + 1}`, type: 'BIGINT' },
        ]),
      );
      await Promise.all(adds);
      const names = (await store.getTable('events'))!.columns.map((c) => c.name);
      expect(names.slice(0, table.columns.length)).toEqual(table.columns.map((c) => c.name));
      expect(names.slice(table.columns.length).sort()).toEqual(Array.from({ length: 13 }, (_, i) => `c${i}`).sort());
    });

    it('lets exactly one of many concurrent swaps over overlapping inputs win, from two replicas', async () => {
      const other = await open();
      const inputs = Array.from({ length: 12 }, (_, i) => `s${String(i).padStart(2, '0')}`);
      for (const id of inputs) await store.commitSegment(segment(id));
      // Merge i takes inputs i and i+1; each is sent twice, once to each replica (a retried activity).
      const attempts = inputs.slice(0, -1).flatMap((id, i) => {
        const retire = [id, inputs[i + 1]!];
        const add = segment(`m${i}`, { level: 1 });
        return [store.swapSegments(retire, add), other.swapSegments(retire, add)].map((p) =>
          p.then(
            () => ({ i, won: true }),
            (error: DomainError) => {
              expect(error).toMatchObject({ kind: 'conflict', code: 'segment_retired' });
              return { i, won: false };
            },
          ),
        );
      });
      const results = await Promise.all(attempts);
      const winners = [...new Set(results.filter((r) => r.won).map((r) => r.i))];
      // Both copies of a merge agree, and no two winners share an input.
      for (const i of winners) expect(results.filter((r) => r.i === i).every((r) => r.won)).toBe(true);
      for (const i of winners) expect(winners).not.toContain(i + 1);
      expect(winners.length).toBeGreaterThan(0);
      const active = (await other.listSegments('events')).map((s) => s.id).sort();
      const retired = new Set(winners.flatMap((i) => [inputs[i]!, inputs[i + 1]!]));
      expect(active).toEqual([...inputs.filter((id) => !retired.has(id)), ...winners.map((i) => `m${i}`)].sort());
      for (const id of retired) expect((await store.getSegment(id))?.replacedBy).toMatch(/^m\d+$/);
    });

    it('grants a contended lease to exactly one of many holders asking two replicas at once', async () => {
      const other = await open();
      const answers = await Promise.all(
        Array.from({ length: 24 }, (_, i) => (i % 2 ? store : other).acquireLease('contended', `w${i}`, 60_000)),
      );
      const granted = answers.filter((a) => a.granted);
      expect(granted).toHaveLength(1);
      const winner = granted[0]!.lease;
      for (const a of answers) expect(a.lease).toEqual(winner);
      expect(await other.getLease('contended')).toEqual(winner);
    });
  });

  describe('migrations', () => {
    it('records every schema version once, even when two replicas start on an empty database at once', async () => {
      const fresh = await impl.fresh();
      try {
        const both = await Promise.all([
          openMetaStore({ database: fresh.database }),
          openMetaStore({ database: fresh.database }),
        ]);
        await both[0].ensureTable(table);
        expect(await both[1].getTable('events')).toEqual(createdTable);
        await Promise.all(both.map((s) => s.close()));
        const versions = (await fresh.raw('SELECT version FROM schema_migrations ORDER BY version')) as {
          version: number;
        }[];
        expect(versions.map((v) => v.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1));
      } finally {
        await fresh.cleanup();
      }
    });

    it('refuses a database that a newer Berth has migrated, and says so', async () => {
      await raw(
        `INSERT INTO schema_migrations (version, name, applied_at) VALUES (${SCHEMA_VERSION + 1}, 'from the future', 0)`,
      );
      await expect(open()).rejects.toThrow(
        new RegExp(`schema version ${SCHEMA_VERSION + 1}, newer than this Berth knows`),
      );
    });
  });
});

describe('SQLite store migrations', () => {
  it('adopts a meta file made before schema versions existed, keeping its rows and giving its leases a token', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-meta-'));
    const file = path.join(dir, 'meta.sqlite');
    try {
      // The schema meta kept before versioned migrations, with a few rows in it.
      const old = openSqlite(file);
      old.exec(`
        CREATE TABLE nodes (id TEXT PRIMARY KEY, grp TEXT NOT NULL, url TEXT NOT NULL, vcpus REAL NOT NULL, started_at INTEGER NOT NULL, last_heartbeat INTEGER NOT NULL);
        CREATE TABLE tables (name TEXT PRIMARY KEY, timestamp_column TEXT NOT NULL, columns TEXT NOT NULL);
        CREATE TABLE segments (id TEXT PRIMARY KEY, tbl TEXT NOT NULL REFERENCES tables(name), min_ts INTEGER NOT NULL, max_ts INTEGER NOT NULL, rows INTEGER NOT NULL, bytes INTEGER NOT NULL, level INTEGER NOT NULL, state TEXT NOT NULL, created_at INTEGER NOT NULL, retired_at INTEGER, replaced_by TEXT);
        CREATE INDEX segments_by_table ON segments (tbl, state, min_ts, max_ts);
        CREATE TABLE leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at INTEGER NOT NULL);
        INSERT INTO tables VALUES ('events', 'ts', '[{"name":"ts","type":"TIMESTAMP"}]');
        INSERT INTO segments VALUES ('s1', 'events', 0, 1000, 10, 100, 0, 'active', 5, NULL, NULL);
        INSERT INTO leases VALUES ('merge:events', 'w1', 9000000000000);`);
      old.close();
      const store = await openMetaStore({ database: file });
      try {
        expect((await store.listSegments('events')).map((s) => s.id)).toEqual(['s1']);
        expect(await store.getLease('merge:events')).toEqual({
          name: 'merge:events',
          holder: 'w1',
          expiresAt: 9_000_000_000_000,
          token: 0,
        });
        expect((await store.acquireLease('fresh', 'w2', 1_000)).lease.token).toBeGreaterThan(0);
      } finally {
        await store.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

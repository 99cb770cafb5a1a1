/**
 * The query node's memory tier (services/query-node/segment-memory.ts): a segment offered a second
 * time is held as a DuckDB table, and a scan that reads held tables beside files answers exactly
 * what the files alone answer, values and types. Its budget holds; a table a scan is reading
 * outlives its eviction until the scan lets go; a load that fails leaves nothing behind.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openSandboxedDuckDB, sqlString, withConnection } from '../services/common/duckdb.js';
import type { ColumnSpec } from '../services/meta/client.js';
import { bindTables, Scanner, withTables, type TableFiles } from '../services/common/scanner.js';
import { SegmentMemory } from '../services/query-node/segment-memory.js';
import { EVERY_TYPE } from './helpers/every-type.js';

/** The columns of EVERY_TYPE that Parquet carries (DuckDB writes the rest as other types or not at all). */
const PARQUET_TYPES = `SELECT * EXCLUDE (uh, bit, big, ttz, iv) FROM (${EVERY_TYPE})`;

describe("the query node's memory tier", () => {
  let dir: string;
  let files: string[];
  let schema: ColumnSpec[];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-segment-memory-'));
    files = ['a', 'b', 'c'].map((name) => path.join(dir, `${name}.parquet`));
    const writer = await DuckDBInstance.create(':memory:');
    try {
      await withConnection(writer, async (c) => {
        for (const [k, file] of files.entries())
          await c.run(
            `COPY (SELECT * REPLACE (i + ${k * 5000} AS i) FROM (${PARQUET_TYPES})) TO ${sqlString(file)} (FORMAT parquet)`,
          );
        const described = await c.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet(${sqlString(files[0]!)})`);
        schema = described.getRows().map(([name, type]) => ({ name: String(name), type: String(type) }));
      });
    } finally {
      writer.closeSync();
    }
    await writeFile(path.join(dir, 'not-parquet.parquet'), 'these bytes are not a Parquet file');
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** A node's DuckDB (sandboxed as a node's is) with a tier of `budgetBytes` on it. */
  async function open(budgetBytes: number, onError?: (error: unknown, id: string) => void) {
    const duckdb = await openSandboxedDuckDB({ allowedDirectories: [dir], tempDirectory: dir, threads: 1 });
    const memory = await SegmentMemory.open({ duckdb, budgetBytes, onError });
    const tablesHeld = async () =>
      withConnection(duckdb, async (c) =>
        (
          await c.runAndReadAll(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'segment_memory' ORDER BY 1",
          )
        )
          .getRows()
          .map(([name]) => String(name)),
      );
    const close = async () => {
      await memory.close();
      duckdb.closeSync();
    };
    return { duckdb, memory, tablesHeld, close };
  }

  /** What a file's pages hold uncompressed, by its footer: a floor for a table of its rows. */
  async function uncompressedBytes(file: string): Promise<number> {
    const reader = await DuckDBInstance.create(':memory:');
    try {
      return await withConnection(reader, async (c) =>
        Number(
          (
            await c.runAndReadAll(`SELECT sum(total_uncompressed_size) FROM parquet_metadata(${sqlString(file)})`)
          ).getRows()[0]![0],
        ),
      );
    } finally {
      reader.closeSync();
    }
  }

  /** What one segment's table weighs in a tier: budgets are set from it. */
  async function oneTableBytes(): Promise<number> {
    const probe = await open(1024 ** 3);
    try {
      await load(probe.memory, 'a', files[0]!);
      return probe.memory.usedBytes;
    } finally {
      await probe.close();
    }
  }

  /** Offers a segment twice: the second offer loads it. */
  async function load(memory: SegmentMemory, id: string, file: string) {
    await memory.offer(id, file);
    await memory.offer(id, file);
  }

  it('loads a segment on its second offer, and files with held tables answer as the files alone, values and types', async () => {
    const { duckdb, memory, close } = await open(1024 ** 3);
    try {
      await memory.offer('a', files[0]!);
      expect(memory.hold('a')).toBeUndefined(); // the first offer is only remembered
      await memory.offer('a', files[0]!);
      await load(memory, 'b', files[1]!);
      expect(memory.counters.loads).toBe(2);
      expect(memory.usedBytes).toBeGreaterThan(0);
      const a = memory.hold('a')!;
      const b = memory.hold('b')!;
      const onFiles: TableFiles = { name: 'events', schema, files };
      const mixed: TableFiles = { name: 'events', schema, files: [files[2]!], inMemory: [a.sql, b.sql] };
      const heldOnly: TableFiles = { name: 'events', schema, files: [], inMemory: [a.sql, b.sql] };
      const narrow = (t: TableFiles): TableFiles => ({ ...t, columns: ['i', 'str', 'd38', 'ts'] });
      const answer = async (sql: string, tables: TableFiles[]) =>
        withConnection(duckdb, async (c) => {
          const statement = withTables(sql, tables);
          if (statement === undefined) await bindTables(c, tables); // the SQL has a WITH of its own
          const reader = await c.runAndReadAll(statement ?? sql);
          return { types: reader.columnTypes().map(String), names: reader.columnNames(), rows: reader.getRows() };
        });
      for (const sql of [
        'SELECT * FROM events ORDER BY i',
        'SELECT count(*), sum(d38), min(str), max(ts) FROM events',
        'WITH big AS (SELECT i, str FROM events WHERE i > 9000) SELECT * FROM big ORDER BY i',
      ]) {
        const expected = await answer(sql, [onFiles]);
        expect(await answer(sql, [mixed]), sql).toEqual(expected);
        expect(await answer(sql.replace('count(*), ', ''), [narrow(mixed)])).toEqual(
          await answer(sql.replace('count(*), ', ''), [narrow(onFiles)]),
        );
      }
      expect((await answer('SELECT count(*) FROM events', [heldOnly])).rows).toEqual([[10_000n]]);
      a.release();
      b.release();
    } finally {
      await close();
    }
  });

  it('answers a scan of held tables again from its prepared statement, also after its tables were dropped and loaded again', async () => {
    // Room for one table: loading b drops a, loading a again drops b.
    const { duckdb, memory, close } = await open(Math.floor((await oneTableBytes()) * 1.5));
    const scanner = new Scanner(duckdb, 1); // one connection, so every scan meets the statements it kept
    const sql = 'SELECT count(*) AS n, sum(i) AS total, max(str) AS longest, min(d38) AS least FROM events';
    const scan = async (tables: TableFiles[]) => {
      const { result, close: done } = await scanner.open(sql, tables);
      const answer = { types: result.columnTypes().map(String), rows: await result.getRows() };
      done(true);
      return answer;
    };
    const scanHeld = async (id: string) => {
      const held = memory.hold(id)!;
      try {
        return await scan([{ name: 'events', schema, files: [], inMemory: [held.sql] }]);
      } finally {
        held.release();
      }
    };
    try {
      const expectedA = await scan([{ name: 'events', schema, files: [files[0]!] }]);
      const expectedB = await scan([{ name: 'events', schema, files: [files[1]!] }]);
      expect(expectedA).not.toEqual(expectedB);
      await load(memory, 'a', files[0]!);
      expect(await scanHeld('a')).toEqual(expectedA);
      expect(await scanHeld('a')).toEqual(expectedA); // the kept statement
      await load(memory, 'b', files[1]!);
      expect(memory.ids()).toEqual(['b']);
      expect(await scanHeld('b')).toEqual(expectedB);
      await load(memory, 'a', files[0]!); // the statement kept for a: its table was dropped and made again
      expect(memory.ids()).toEqual(['a']);
      expect(await scanHeld('a')).toEqual(expectedA);
    } finally {
      scanner.close();
      await close();
    }
  });

  it('keeps within its budget, evicting what came first, and drops what it evicts', async () => {
    const { memory, tablesHeld, close } = await open(Math.floor((await oneTableBytes()) * 1.5));
    try {
      await load(memory, 'a', files[0]!);
      await load(memory, 'b', files[1]!);
      expect(memory.usedBytes).toBeLessThanOrEqual(memory.budgetBytes);
      // At least what the file's pages hold uncompressed, whatever DuckDB's memory did meanwhile.
      expect(memory.usedBytes).toBeGreaterThanOrEqual(await uncompressedBytes(files[1]!));
      expect(memory.ids()).toEqual(['b']);
      expect(memory.counters.evictions).toBe(1);
      await vi.waitFor(async () => expect(await tablesHeld()).toEqual(['b']), { timeout: 30_000 });
    } finally {
      await close();
    }
  });

  it('drops an evicted table only when the last scan reading it lets go', async () => {
    const { duckdb, memory, tablesHeld, close } = await open(Math.floor((await oneTableBytes()) * 1.5));
    try {
      await load(memory, 'a', files[0]!);
      const reading = memory.hold('a')!;
      const aBytes = memory.usedBytes;
      await load(memory, 'b', files[1]!); // evicts a, which a scan still reads
      expect(memory.hold('a')).toBeUndefined();
      expect(memory.usedBytes).toBeGreaterThan(aBytes); // a's rows are still in memory: still counted
      await load(memory, 'a', files[0]!); // not loaded again while its old table is read
      expect(memory.counters.loads).toBe(2);
      const count = await withConnection(duckdb, (c) => c.runAndReadAll(`SELECT count(*) FROM ${reading.sql}`));
      expect(count.getRows()).toEqual([[5000n]]);
      expect(await tablesHeld()).toEqual(['a', 'b']);
      const bothBytes = memory.usedBytes;
      reading.release();
      expect(memory.usedBytes).toBe(bothBytes - aBytes);
      await vi.waitFor(async () => expect(await tablesHeld()).toEqual(['b']), { timeout: 30_000 });
    } finally {
      await close();
    }
  });

  it('refuses a segment larger than its budget once, and does not decode it again', async () => {
    const { memory, tablesHeld, close } = await open(Math.floor((await uncompressedBytes(files[0]!)) / 2));
    try {
      await load(memory, 'a', files[0]!);
      expect(memory.counters.refusedLoads).toBe(1);
      await load(memory, 'a', files[0]!);
      await load(memory, 'a', files[0]!);
      expect(memory.counters.refusedLoads).toBe(1);
      expect(memory.hold('a')).toBeUndefined();
      expect(memory.usedBytes).toBe(0);
      expect(await tablesHeld()).toEqual([]);
    } finally {
      await close();
    }
  });

  it('settles every offer when closed with a load and a drop waiting, and leaves no promise rejected', async () => {
    const { memory, close } = await open(Math.floor((await oneTableBytes()) * 1.5));
    await load(memory, 'a', files[0]!);
    await memory.offer('b', files[1]!);
    await memory.offer('c', files[2]!);
    const loadingB = memory.offer('b', files[1]!);
    const loadingC = memory.offer('c', files[2]!);
    await loadingB; // b evicted a: a's drop waits behind c's load
    await close();
    await loadingC;
    await expect(memory.offer('d', files[0]!)).resolves.toBeUndefined(); // closed: nothing more is taken
    expect(memory.counters.loads).toBeGreaterThanOrEqual(2);
  });

  it('holds nothing when its budget is 0', async () => {
    const { memory, tablesHeld, close } = await open(0);
    try {
      await load(memory, 'a', files[0]!);
      await load(memory, 'a', files[0]!);
      expect(memory.hold('a')).toBeUndefined();
      expect(memory.counters.loads).toBe(0);
      expect(await tablesHeld()).toEqual([]);
    } finally {
      await close();
    }
  });

  it('leaves no table behind when a load fails, and says which segment failed', async () => {
    const failures: string[] = [];
    const { memory, tablesHeld, close } = await open(1024 ** 3, (error, id) =>
      failures.push(`${id}: ${(error as Error).message}`),
    );
    try {
      await load(memory, 'broken', path.join(dir, 'not-parquet.parquet'));
      expect(failures).toHaveLength(1);
      expect(failures[0]).toMatch(/^broken: .*parquet/i);
      expect(memory.counters.failedLoads).toBe(1);
      await load(memory, 'broken', path.join(dir, 'not-parquet.parquet'));
      expect(memory.counters.failedLoads).toBe(1); // remembered: not tried again
      expect(memory.hold('broken')).toBeUndefined();
      expect(memory.usedBytes).toBe(0);
      expect(await tablesHeld()).toEqual([]);
    } finally {
      await close();
    }
  });
});

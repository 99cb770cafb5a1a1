/**
 * The query node's scanner. Scans of a segment held in part: DuckDB plans each over what the file
 * holds, the cache fills the column chunks the scan reads into the same file, and the same DuckDB
 * then scans it; every scan must see the bytes as they are now. A scan DuckDB stops part way
 * fails, with DuckDB's reason. Its connections serve one scan after another: nothing one scan
 * bound is seen by the next.
 */
import { mkdir, mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { segmentObjectKey } from '../core/identifiers.js';
import { arrowStream } from '../services/common/arrow-exchange.js';
import { openSandboxedDuckDB, ResultCutShort, withConnection } from '../services/common/duckdb.js';
import { createS3Client } from '../services/common/s3-client.js';
import { Scanner, type TableFiles } from '../services/common/scanner.js';
import { SegmentCache, type HeldSegment } from '../services/query-node/segment-cache.js';
import { SegmentSchemas } from '../services/query-node/segment-schema.js';
import { EVENT_COLUMNS, writeEventFiles } from './helpers/event-data.js';

const bucket = inject('s3Bucket');

describe("the query node's scanner", () => {
  let s3: S3Client;
  let dir: string;
  let original: string;
  let duckdb: DuckDBInstance;

  beforeAll(async () => {
    s3 = createS3Client({ endpoint: inject('s3Endpoint'), credentials: inject('s3Credentials') });
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-cold-part-'));
    await mkdir(path.join(dir, 'source'));
    await mkdir(path.join(dir, 'segments'));
    original = (await writeEventFiles(path.join(dir, 'source'), 1, 20_000))[0]!;
    duckdb = await openSandboxedDuckDB({ allowedDirectories: [dir], tempDirectory: dir, threads: 1 });
  });
  afterAll(async () => {
    duckdb?.closeSync();
    s3?.destroy();
    await rm(dir, { recursive: true, force: true });
  });

  /** What the scan handler does: plan over what the file holds, fetch what the scan reads, scan. */
  const scan = async (scanner: Scanner, held: HeldSegment, sql: string, columns: string[]) => {
    const tables: TableFiles[] = [{ name: 'events', schema: EVENT_COLUMNS, columns, files: [held.path] }];
    await held.ensure(await scanner.columnsRead(sql, tables));
    const opened = await scanner.open(sql, tables);
    let ended = false;
    try {
      const rows = await opened.result.getRowsJson();
      ended = true;
      return rows;
    } finally {
      opened.close(ended);
    }
  };
  const direct = (sql: string) =>
    withConnection(duckdb, async (c) =>
      (await c.runAndReadAll(sql.replace('FROM events', `FROM read_parquet('${original}')`))).getRowsJson(),
    );

  it('reads segments of different columns as the scan’s schema: NULL where one lacks a column, nothing of one it does not have', async () => {
    // An older segment, and one written after the table gained "b" (and "Extra", which this scan's schema predates).
    const older = path.join(dir, 'segments', 'older.parquet');
    const newer = path.join(dir, 'segments', 'newer.parquet');
    await withConnection(duckdb, async (c) => {
      await c.run(`COPY (SELECT TIMESTAMP '2026-11-01' AS ts, 1::BIGINT AS a) TO '${older}' (FORMAT parquet)`);
      await c.run(
        `COPY (SELECT TIMESTAMP '2026-11-02' AS ts, 2::BIGINT AS a, 'x' AS b, 7 AS "Extra") TO '${newer}' (FORMAT parquet)`,
      );
    });
    const schema = [
      { name: 'ts', type: 'TIMESTAMP' },
      { name: 'a', type: 'BIGINT' },
      { name: 'b', type: 'VARCHAR' },
    ];
    const schemas = new SegmentSchemas(duckdb);
    const files = [newer, older]; // the wider file first, where DuckDB would take its columns for the list's
    const shapes = new Map(
      await Promise.all(files.map(async (f) => [f, await schemas.check(f, { file: f }, schema)] as const)),
    );
    const scanner = new Scanner(duckdb);
    const rows = async (sql: string, tableSchema: typeof schema) => {
      const opened = await scanner.open(sql, [{ name: 'evolved', schema: tableSchema, files, shapes }]);
      try {
        return await opened.result.getRowsJson();
      } finally {
        opened.close(true);
      }
    };
    expect(await rows('SELECT a, b FROM evolved ORDER BY a', schema)).toEqual([
      ['1', null],
      ['2', 'x'],
    ]);
    expect(await rows('SELECT * FROM evolved ORDER BY a', schema.slice(0, 2))).toEqual([
      ['2026-11-01 00:00:00', '1'],
      ['2026-11-02 00:00:00', '2'],
    ]);
  });

  it('reads a file as it is now, though it was filled in place within the second after a read', async () => {
    const object = await readFile(original);
    const footer = object.readUInt32LE(object.length - 8) + 8;
    const file = path.join(dir, 'segments', `in-place-${Date.now()}.parquet`);
    // The footer alone at its offset (the rest zeros), as a segment held in part starts.
    const sparse = Buffer.alloc(object.length);
    object.copy(sparse, object.length - footer, object.length - footer);
    await writeFile(file, sparse);
    const sql = `SELECT service, count(*) AS n, sum(bytes) AS bytes FROM read_parquet('${file}') GROUP BY service ORDER BY service`;
    await expect(withConnection(duckdb, (c) => c.run(sql))).rejects.toThrow(); // its column chunks are not there yet
    const handle = await open(file, 'r+');
    try {
      await handle.write(object, 0, object.length - footer, 0);
    } finally {
      await handle.close();
    }
    expect(await withConnection(duckdb, async (c) => (await c.runAndReadAll(sql)).getRowsJson())).toEqual(
      await direct(sql.replace(file, original)),
    );
  });

  it('reads the columns fetched after earlier scans, as the object holds them', async () => {
    const id = `cold-part-${Date.now()}`;
    await s3.send(
      new PutObjectCommand({ Bucket: bucket, Key: segmentObjectKey('coldpart', id), Body: await readFile(original) }),
    );
    const cache = await SegmentCache.open({
      dir: path.join(dir, 'segments'),
      budgetBytes: 64 * 1024 ** 2,
      s3,
      bucket,
      duckdb,
    });
    const scanner = new Scanner(duckdb);
    const held = await cache.acquire('coldpart', id, { partial: true });
    expect(held.complete).toBe(false);
    try {
      // Each query reads columns the ones before it did not: the file fills in place between scans.
      // Each query reads columns the ones before it did not (as the coordinator names them): the
      // file fills in place between scans. The first one's filter on ts holds for the whole file,
      // by its statistics: DuckDB's plan leaves it out, yet still reads ts.
      for (const [sql, columns] of [
        [
          `SELECT service, count(*) AS n, sum(bytes) AS bytes FROM events WHERE ts >= TIMESTAMP '2026-11-01' AND ts < TIMESTAMP '2026-12-01' GROUP BY service ORDER BY service`,
          ['ts', 'service', 'bytes'],
        ],
        [
          'SELECT service, max(latency_ms) AS slowest FROM events WHERE status >= 500 GROUP BY service ORDER BY service',
          ['service', 'latency_ms', 'status'],
        ],
        [
          "SELECT region, count(DISTINCT user_id) AS users, min(ts) AS first FROM events WHERE level = 'error' GROUP BY region ORDER BY region",
          ['region', 'user_id', 'ts', 'level'],
        ],
      ] as const) {
        expect(await scan(scanner, held, sql, [...columns])).toEqual(await direct(sql));
      }
    } finally {
      held.release();
    }
  });

  it('fails a scan that DuckDB stops part way, rather than sending its first rows as the whole', async () => {
    // One thread reads the file in order: the rows of the last day come after megabytes of rows went out.
    const sql = `SELECT *, repeat('x', 100) AS padding, CASE WHEN ts >= TIMESTAMP '2026-11-07' THEN error('a late row') END AS boom FROM events`;
    const tables: TableFiles[] = [{ name: 'events', schema: EVENT_COLUMNS, files: [original] }];
    const scanner = new Scanner(duckdb);
    const opened = await scanner.open(sql, tables);
    let rows = 0;
    try {
      const sent = (async () => {
        for await (const bytes of arrowStream(opened.result, (n) => (rows += n))) void bytes;
      })();
      await expect(sent).rejects.toBeInstanceOf(ResultCutShort);
    } finally {
      opened.close(false);
    }
    // It stopped part way: after chunks went out, before the first row of the last day (row 17,280).
    expect(rows).toBeGreaterThan(2_048);
    expect(rows).toBeLessThanOrEqual(17_280);
    // DuckDB's reason, from the scan run again unstreamed.
    expect(scanner.explain(await scanner.reason(sql, tables), tables)).toMatchObject({
      code: 'query_failed',
      message: expect.stringMatching(/a late row/),
    });
    expect(await scanner.reason('SELECT count(*) FROM events', tables)).toBeUndefined();
    scanner.close();
  });

  it('serves scans one after another on its connections, each seeing only its own tables', async () => {
    const scanner = new Scanner(duckdb);
    const rows = async (sql: string, tables: TableFiles[]) => {
      const opened = await scanner.open(sql, tables);
      const result = await opened.result.getRowsJson();
      opened.close(true);
      await vi.waitFor(() => expect(scanner.idleConnections).toBe(1)); // given back, its tables dropped
      return result;
    };
    const events: TableFiles = { name: 'events', schema: EVENT_COLUMNS, files: [original] };
    const empty: TableFiles = { name: 'quiet', schema: EVENT_COLUMNS, files: [] };
    for (let round = 0; round < 3; round++) {
      expect(await rows('SELECT count(*) AS n FROM events', [events])).toEqual([['20000']]);
      expect(await rows('SELECT count(*) AS n FROM quiet', [empty])).toEqual([['0']]);
    }
    // A table bound by an earlier scan is not there for a scan that did not bind it.
    expect(await rows('SELECT count(*) AS n FROM events', [events])).toEqual([['20000']]);
    await expect(scanner.open('SELECT count(*) FROM events', [empty])).rejects.toThrow(/events/);
    expect(await rows('SELECT count(*) AS n FROM quiet', [empty])).toEqual([['0']]);
    await expect(scanner.open('SELECT count(*) FROM quiet', [events])).rejects.toThrow(/quiet/);
    scanner.close();
  });
});

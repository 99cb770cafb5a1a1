import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { segmentObjectKey } from '../core/identifiers.js';
import { createS3Client } from '../services/common/s3-client.js';
import { SegmentCache } from '../services/query-node/segment-cache.js';
import { writeEventFiles } from './helpers/event-data.js';

const bucket = inject('s3Bucket');
const SEGMENT_BYTES = 1000;
/** Segments for scans larger than the cache. */
const SCAN = Array.from({ length: 20 }, (_, i) => `scan-${String(i).padStart(2, '0')}`);

describe('the segment cache', () => {
  let s3: S3Client;
  let dir: string;
  const open = (budgetBytes: number) => SegmentCache.open({ dir, budgetBytes, s3, bucket });

  beforeAll(async () => {
    s3 = createS3Client({ endpoint: inject('s3Endpoint'), credentials: inject('s3Credentials') });
    for (const id of ['c-1', 'c-2', 'c-3', 'c-4', ...SCAN]) {
      await s3.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: segmentObjectKey('cachetest', id),
          Body: Buffer.alloc(SEGMENT_BYTES, id),
        }),
      );
    }
  });
  afterAll(() => s3.destroy());
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-cache-'));
    return () => rm(dir, { recursive: true, force: true });
  });

  it('fetches a segment from S3 once however many scans miss on it at the same time', async () => {
    const cache = await open(10 * SEGMENT_BYTES);
    const held = await Promise.all(Array.from({ length: 8 }, () => cache.acquire('cachetest', 'c-1')));
    expect(cache.counters.s3Gets).toBe(1);
    expect(held.filter((h) => !h.hit)).toHaveLength(1);
    expect(held.reduce((sum, h) => sum + h.bytesFetched, 0)).toBe(SEGMENT_BYTES);
    held.forEach((h) => h.release());
    const again = await cache.acquire('cachetest', 'c-1');
    expect(again.hit).toBe(true);
    again.release();
  });

  it('evicts the oldest segment that no scan came back to, to stay within its byte budget', async () => {
    const cache = await open(3 * SEGMENT_BYTES);
    for (const id of ['c-1', 'c-2', 'c-3']) (await cache.acquire('cachetest', id)).release();
    (await cache.acquire('cachetest', 'c-1')).release(); // read again: c-2 is now the oldest read once
    (await cache.acquire('cachetest', 'c-4')).release();
    expect(cache.ids().sort()).toEqual(['c-1', 'c-3', 'c-4']);
    expect(cache.usedBytes).toBe(3 * SEGMENT_BYTES);
    await expect.poll(async () => (await readdir(dir)).sort()).toEqual(['c-1.parquet', 'c-3.parquet', 'c-4.parquet']);
  });

  it('keeps the segments that queries keep reading through a scan larger than the cache', async () => {
    const cache = await open(5 * SEGMENT_BYTES);
    for (let i = 0; i < 2; i++) for (const id of ['c-1', 'c-2']) (await cache.acquire('cachetest', id)).release();
    for (const id of SCAN) (await cache.acquire('cachetest', id)).release(); // 4 times the budget, each read once
    const hot = await Promise.all(['c-1', 'c-2'].map((id) => cache.acquire('cachetest', id)));
    expect(hot.map((h) => h.hit)).toEqual([true, true]); // under LRU the scan took both
    hot.forEach((h) => h.release());
    expect(cache.usedBytes).toBeLessThanOrEqual(5 * SEGMENT_BYTES);
    await expect.poll(async () => (await readdir(dir)).length).toBe(cache.ids().length);
  });

  it('hits on part of a repeated full scan larger than the cache (LRU: none)', async () => {
    const cache = await open(15 * SEGMENT_BYTES); // three quarters of the scan
    const hits: number[] = [];
    for (let pass = 0; pass < 4; pass++) {
      const before = cache.counters.hits;
      for (const id of SCAN) (await cache.acquire('cachetest', id)).release();
      hits.push(cache.counters.hits - before);
    }
    // From the third pass on, a stable part of the scan stays (LRU would miss on every read).
    expect(hits[2]).toBeGreaterThanOrEqual(SCAN.length / 3);
    expect(hits[3]).toBeGreaterThanOrEqual(SCAN.length / 3);
    expect(cache.counters.bytesFromS3).toBe((4 * SCAN.length - hits.reduce((a, b) => a + b, 0)) * SEGMENT_BYTES);
  });

  it('serves a segment larger than the whole budget once, and does not keep it', async () => {
    const cache = await open(SEGMENT_BYTES / 2);
    const held = await cache.acquire('cachetest', 'c-3');
    expect(held.hit).toBe(false);
    expect((await readdir(dir)).includes('c-3.parquet')).toBe(true); // readable while held
    expect(cache.has('c-3')).toBe(false);
    held.release();
    await expect.poll(async () => readdir(dir)).toEqual([]);
    expect(cache.usedBytes).toBe(0);
  });

  it('keeps a file that a scan still reads until the scan lets go of it', async () => {
    const cache = await open(SEGMENT_BYTES);
    const reading = await cache.acquire('cachetest', 'c-1');
    (await cache.acquire('cachetest', 'c-2')).release(); // evicts c-1 while it is pinned
    expect(cache.has('c-1')).toBe(false);
    expect((await readdir(dir)).includes('c-1.parquet')).toBe(true);
    reading.release();
    await expect.poll(async () => (await readdir(dir)).includes('c-1.parquet')).toBe(false);
  });

  it('comes back warm from the files on disk after a restart, dropping half-written downloads', async () => {
    const first = await open(10 * SEGMENT_BYTES);
    for (const id of ['c-1', 'c-2']) (await first.acquire('cachetest', id)).release();
    await writeFile(path.join(dir, 'c-3.parquet.123.abc.tmp'), 'partial');
    const second = await open(10 * SEGMENT_BYTES);
    expect(second.ids().sort()).toEqual(['c-1', 'c-2']);
    const held = await second.acquire('cachetest', 'c-2');
    expect(held.hit).toBe(true);
    held.release();
    expect(second.counters.s3Gets).toBe(0);
    expect((await readdir(dir)).some((f) => f.endsWith('.tmp'))).toBe(false);
  });

  it('lets the warmer fill only free space, never evicting', async () => {
    const cache = await open(2 * SEGMENT_BYTES);
    expect(await cache.prefetch('cachetest', 'c-1', SEGMENT_BYTES)).toBe(true);
    expect(await cache.prefetch('cachetest', 'c-2', SEGMENT_BYTES)).toBe(true);
    expect(await cache.prefetch('cachetest', 'c-3', SEGMENT_BYTES)).toBe(false);
    expect(cache.ids().sort()).toEqual(['c-1', 'c-2']);
  });
});

describe('a segment held in part', () => {
  const ID = 'part-1';
  let s3: S3Client;
  let dir: string;
  let duckdb: DuckDBInstance;
  let object: Buffer;
  let original: string;
  let source: string;
  /** Bytes of each column's chunks in the object, from its footer. */
  const columnBytes = new Map<string, number>();
  const open = (budgetBytes = 64 * 1024 * 1024) => SegmentCache.open({ dir, budgetBytes, s3, bucket, duckdb });
  const rows = async (file: string, sql: string) => {
    const connection = await duckdb.connect();
    try {
      return (await connection.runAndReadAll(sql.replace('FILE', `read_parquet('${file}')`))).getRowsJson();
    } finally {
      connection.closeSync();
    }
  };

  beforeAll(async () => {
    s3 = createS3Client({ endpoint: inject('s3Endpoint'), credentials: inject('s3Credentials') });
    source = await mkdtemp(path.join(os.tmpdir(), 'berth-part-source-'));
    original = (await writeEventFiles(source, 1, 300_000))[0]!; // three row groups
    object = await readFile(original);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: segmentObjectKey('cachetest', ID), Body: object }));
    duckdb = await DuckDBInstance.create(':memory:');
    for (const [column, bytes] of await rows(
      original!,
      'SELECT path_in_schema, sum(total_compressed_size) FROM parquet_metadata(FILE) GROUP BY 1'.replace(
        'FILE',
        `'${original}'`,
      ),
    )) {
      columnBytes.set(String(column), Number(bytes));
    }
  });
  afterAll(async () => {
    duckdb?.closeSync();
    s3?.destroy();
    await rm(source, { recursive: true, force: true });
  });
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-part-'));
    return () => rm(dir, { recursive: true, force: true });
  });

  it('fetches a cold segment’s footer, then only the chunks of the columns asked for, and reads as the object', async () => {
    const cache = await open();
    const held = await cache.acquire('cachetest', ID, { partial: true });
    expect(held.complete).toBe(false);
    // The footer with the object's last 64 KiB (twice that from a server without suffix ranges).
    expect(held.bytesFetched).toBeLessThanOrEqual(2 * 64 * 1024 + 1);
    expect((await stat(held.path)).size).toBe(object.length);

    const footer = held.bytesFetched;
    await held.ensure(['service', 'bytes']);
    const needed = columnBytes.get('service')! + columnBytes.get('bytes')!;
    expect(held.bytesFetched - footer).toBeGreaterThan(needed - 64 * 1024);
    expect(held.bytesFetched - footer).toBeLessThan(needed + 2 * 64 * 1024); // bytes outside chunks, small gaps between GETs
    expect(held.bytesFetched).toBeLessThan(object.length / 2);
    expect(cache.usedBytes).toBeLessThanOrEqual(held.bytesFetched);
    const query = 'SELECT service, count(*), sum(bytes) FROM FILE GROUP BY ALL ORDER BY ALL';
    expect(await rows(held.path, query)).toEqual(await rows(original, query));

    // A column read for the first time: its chunks, nothing more.
    const before = held.bytesFetched;
    await held.ensure(['latency_ms', 'service']);
    expect(held.bytesFetched - before).toBeGreaterThanOrEqual(columnBytes.get('latency_ms')! - 64 * 1024);
    expect(held.bytesFetched - before).toBeLessThanOrEqual(columnBytes.get('latency_ms')! + 64 * 1024);
    const withLatency = 'SELECT service, max(latency_ms), sum(bytes) FROM FILE GROUP BY ALL ORDER BY ALL';
    expect(await rows(held.path, withLatency)).toEqual(await rows(original, withLatency));

    // Every column: byte for byte the object, and no longer held in part.
    await held.ensure();
    expect(held.complete).toBe(true);
    expect((await readFile(held.path)).equals(object)).toBe(true);
    expect(cache.usedBytes).toBe(object.length);
    held.release();
    expect(await readdir(dir)).toEqual([`${ID}.parquet`]);
    expect(cache.counters.misses).toBe(1);
  });

  it('keeps a segment held in part across a restart, and fetches only what it lacks later', async () => {
    const first = await open();
    const held = await first.acquire('cachetest', ID, { partial: true });
    await held.ensure(['status']);
    held.release();
    const used = first.usedBytes;

    const second = await open();
    expect(second.ids()).toEqual([ID]);
    expect(second.usedBytes).toBe(used);
    const again = await second.acquire('cachetest', ID, { partial: true });
    await again.ensure(['status']);
    expect(again.hit).toBe(true);
    expect(second.counters.s3Gets).toBe(0);
    await again.ensure(['level']);
    expect(again.hit).toBe(false);
    const query = 'SELECT level, status, count(*) FROM FILE GROUP BY ALL ORDER BY ALL';
    expect(await rows(again.path, query)).toEqual(await rows(original, query));
    again.release();
  });

  it('takes a pushed body whole in place of the segment it held in part', async () => {
    const cache = await open();
    const held = await cache.acquire('cachetest', ID, { partial: true });
    await held.ensure(['service']);
    held.release();
    expect(await cache.put(ID, Readable.from([object]))).toBe(object.length);
    const whole = await cache.acquire('cachetest', ID, { partial: true });
    expect(whole.complete).toBe(true);
    expect((await readFile(whole.path)).equals(object)).toBe(true);
    whole.release();
    expect(await readdir(dir)).toEqual([`${ID}.parquet`]);
  });

  it('completes a segment held in part for a reader that wants it whole', async () => {
    const cache = await open();
    const held = await cache.acquire('cachetest', ID, { partial: true });
    await held.ensure(['service']);
    held.release();
    const whole = await cache.acquire('cachetest', ID);
    expect(whole.complete).toBe(true);
    expect(whole.hit).toBe(false);
    expect((await readFile(whole.path)).equals(object)).toBe(true);
    whole.release();
  });

  it('lets the warmer fetch a footer first, then the rest of the segment while it fits without evicting', async () => {
    const cache = await open();
    expect(await cache.prefetchFooter('cachetest', ID, object.length)).toBe(true);
    expect(cache.has(ID) && !cache.holdsWhole(ID)).toBe(true);
    expect(cache.counters.bytesFromS3).toBeLessThanOrEqual(2 * 64 * 1024 + 1);
    expect(await cache.prefetchFooter('cachetest', ID, object.length)).toBe(false); // held already
    expect(await cache.prefetch('cachetest', ID, object.length)).toBe(true);
    expect(cache.holdsWhole(ID)).toBe(true);
    expect((await readFile(cache.pathOf(ID))).equals(object)).toBe(true);
    expect(cache.counters.bytesFromS3).toBe(object.length);
    expect(await cache.prefetch('cachetest', ID, object.length)).toBe(false);

    const small = await open(object.length / 2);
    expect(await small.prefetchFooter('cachetest', ID, object.length)).toBe(true);
    expect(await small.prefetch('cachetest', ID, object.length)).toBe(false); // the whole would not fit
    expect(small.has(ID) && !small.holdsWhole(ID)).toBe(true);
  });

  it('counts only the bytes present against its budget, and evicts a segment held in part like any other', async () => {
    const cache = await open(object.length / 2);
    const held = await cache.acquire('cachetest', ID, { partial: true });
    await held.ensure(['service']);
    expect(cache.has(ID)).toBe(true);
    await held.ensure(); // the whole object no longer fits: it is served, then dropped
    expect(cache.has(ID)).toBe(false);
    expect((await readFile(held.path)).equals(object)).toBe(true);
    held.release();
    await expect.poll(async () => readdir(dir)).toEqual([]);
    expect(cache.usedBytes).toBe(0);
  });
});

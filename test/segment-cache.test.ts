import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { segmentObjectKey } from '../core/identifiers.js';
import { createS3Client } from '../services/common/s3-client.js';
import { SegmentCache } from '../services/query-node/segment-cache.js';

const bucket = inject('s3Bucket');
const SEGMENT_BYTES = 1000;

describe('the segment cache', () => {
  let s3: S3Client;
  let dir: string;
  const open = (budgetBytes: number) => SegmentCache.open({ dir, budgetBytes, s3, bucket });

  beforeAll(async () => {
    s3 = createS3Client({ endpoint: inject('s3Endpoint'), credentials: inject('s3Credentials') });
    for (const id of ['c-1', 'c-2', 'c-3', 'c-4']) {
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: segmentObjectKey('cachetest', id), Body: Buffer.alloc(SEGMENT_BYTES, id) }));
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

  it('evicts the least recently used segment to stay within its byte budget', async () => {
    const cache = await open(3 * SEGMENT_BYTES);
    for (const id of ['c-1', 'c-2', 'c-3']) (await cache.acquire('cachetest', id)).release();
    (await cache.acquire('cachetest', 'c-1')).release(); // c-2 is now the least recently used
    (await cache.acquire('cachetest', 'c-4')).release();
    expect(cache.ids().sort()).toEqual(['c-1', 'c-3', 'c-4']);
    expect(cache.usedBytes).toBe(3 * SEGMENT_BYTES);
    await expect.poll(async () => (await readdir(dir)).sort()).toEqual(['c-1.parquet', 'c-3.parquet', 'c-4.parquet']);
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

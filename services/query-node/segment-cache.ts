/**
 * The node's disk cache of segment files: a byte budget, S3-FIFO eviction (core/s3-fifo.ts: a
 * scan larger than the cache passes through without flushing what queries keep reading, where
 * LRU would), and one S3 GET per segment however many scans miss on it at once (single flight).
 * Files a scan is reading are pinned: evicting one defers its deletion until the last reader lets
 * go. The cache survives a restart: the files on disk are its contents.
 */
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { segmentObjectKey } from '../../core/identifiers.js';
import { S3Fifo } from '../../core/s3-fifo.js';
import { HttpError } from '../common/errors.js';

export interface SegmentCacheOptions {
  dir: string;
  budgetBytes: number;
  s3: S3Client;
  bucket: string;
}

/** A segment file held for reading; call release() when done with it. */
export interface HeldSegment {
  path: string;
  /** True when the file was already cached. */
  hit: boolean;
  /** Bytes read from S3 to serve this request (0 on a hit). */
  bytesFetched: number;
  release(): void;
}

export interface CacheCounters {
  hits: number;
  misses: number;
  s3Gets: number;
  bytesFromS3: number;
}

export class SegmentCache {
  private readonly policy: S3Fifo<string>;
  private readonly inflight = new Map<string, Promise<number>>();
  private readonly pins = new Map<string, number>();
  /** Evicted while pinned: deleted on the last release. */
  private readonly doomed = new Set<string>();
  readonly counters: CacheCounters = { hits: 0, misses: 0, s3Gets: 0, bytesFromS3: 0 };

  private constructor(private readonly options: SegmentCacheOptions) {
    this.policy = new S3Fifo<string>({ maxSize: options.budgetBytes, onEvict: (id) => this.discard(id) });
  }

  /** Opens the cache, taking in what an earlier run left in the directory. */
  static async open(options: SegmentCacheOptions): Promise<SegmentCache> {
    await mkdir(options.dir, { recursive: true });
    const cache = new SegmentCache(options);
    const files = await readdir(options.dir);
    const found: { id: string; bytes: number; mtime: number }[] = [];
    for (const file of files) {
      const full = path.join(options.dir, file);
      if (!file.endsWith('.parquet')) {
        await rm(full, { force: true }); // a download cut short by a crash
        continue;
      }
      const info = await stat(full);
      found.push({ id: file.slice(0, -'.parquet'.length), bytes: info.size, mtime: info.mtimeMs });
    }
    // Oldest first, so that the oldest are the first to leave.
    for (const f of found.sort((a, b) => a.mtime - b.mtime)) cache.keep(f.id, f.bytes);
    return cache;
  }

  get usedBytes(): number {
    return this.policy.usedSize;
  }

  get budgetBytes(): number {
    return this.options.budgetBytes;
  }

  has(id: string): boolean {
    return this.policy.has(id);
  }

  /** Segment ids in the cache. */
  ids(): string[] {
    return this.policy.keys();
  }

  pathOf(id: string): string {
    return path.join(this.options.dir, `${id}.parquet`);
  }

  /** Holds a segment for reading, fetching it from S3 on a miss. */
  async acquire(table: string, id: string): Promise<HeldSegment> {
    this.pin(id);
    try {
      let hit = this.policy.hit(id);
      let bytesFetched = 0;
      if (hit) {
        this.counters.hits++;
      } else {
        const flight = this.inflight.get(id);
        if (flight) {
          await flight; // another scan is fetching it: wait, and count a hit on its download
          hit = true;
          this.counters.hits++;
        } else {
          this.counters.misses++;
          bytesFetched = await this.fetch(table, id);
        }
      }
      return { path: this.pathOf(id), hit, bytesFetched, release: () => this.unpin(id) };
    } catch (error) {
      this.unpin(id);
      throw error;
    }
  }

  /** Fetches a segment into the cache only if it fits without evicting anything (the warmer). */
  async prefetch(table: string, id: string, bytes: number): Promise<boolean> {
    if (this.policy.has(id) || this.inflight.has(id)) return false;
    if (this.usedBytes + bytes > this.options.budgetBytes) return false;
    await this.fetch(table, id);
    return true;
  }

  /** Stores a pushed segment body. */
  put(id: string, body: Readable): Promise<number> {
    return this.inFlight(id, () => this.write(id, body));
  }

  private fetch(table: string, id: string): Promise<number> {
    return this.inFlight(id, async () => {
      const response = await this.options.s3.send(new GetObjectCommand({ Bucket: this.options.bucket, Key: segmentObjectKey(table, id) }));
      this.counters.s3Gets++;
      const bytes = await this.write(id, response.Body as Readable);
      this.counters.bytesFromS3 += bytes;
      return bytes;
    });
  }

  /** Runs a download of `id` while recording it, so that concurrent readers wait on it instead of fetching again. */
  private async inFlight(id: string, work: () => Promise<number>): Promise<number> {
    const flight = work();
    this.inflight.set(id, flight);
    try {
      return await flight;
    } finally {
      this.inflight.delete(id);
    }
  }

  private async write(id: string, body: Readable): Promise<number> {
    const final = this.pathOf(id);
    const temp = `${final}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    try {
      await pipeline(body, createWriteStream(temp));
      const { size } = await stat(temp);
      await rename(temp, final);
      this.doomed.delete(id);
      this.keep(id, size);
      return size;
    } catch (error) {
      await rm(temp, { force: true });
      if (error instanceof HttpError) throw error; // the body broke a limit: the sender's fault
      throw new Error(`caching segment ${id} failed`, { cause: error });
    }
  }

  /** Hands a file on disk to the policy; one larger than the whole budget is not kept. */
  private keep(id: string, bytes: number): void {
    if (!this.policy.set(id, Math.max(1, bytes))) this.discard(id);
  }

  private pin(id: string): void {
    this.pins.set(id, (this.pins.get(id) ?? 0) + 1);
  }

  private unpin(id: string): void {
    const left = (this.pins.get(id) ?? 1) - 1;
    if (left > 0) {
      this.pins.set(id, left);
      return;
    }
    this.pins.delete(id);
    if (this.doomed.delete(id)) void rm(this.pathOf(id), { force: true });
  }

  private discard(id: string): void {
    if (this.pins.has(id)) this.doomed.add(id);
    else void rm(this.pathOf(id), { force: true });
  }
}

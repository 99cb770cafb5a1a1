/**
 * The node's disk cache of segment files: a byte budget, least-recently-used eviction, and one S3
 * GET per segment however many scans miss on it at once (single flight). Files a scan is reading
 * are pinned: evicting one defers its deletion until the last reader lets go. The cache survives a
 * restart: the files on disk are its contents.
 */
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { LRUCache } from 'lru-cache';
import { segmentObjectKey } from '../../core/identifiers.js';
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
  /** False when the file was read from S3 for this request only (see acquire's `keep`). */
  kept: boolean;
  release(): void;
}

export interface CacheCounters {
  hits: number;
  misses: number;
  s3Gets: number;
  bytesFromS3: number;
}

interface Entry {
  bytes: number;
}

export class SegmentCache {
  private readonly lru: LRUCache<string, Entry>;
  private readonly inflight = new Map<string, Promise<number>>();
  private readonly pins = new Map<string, number>();
  /** Evicted while pinned: deleted on the last release. */
  private readonly doomed = new Set<string>();
  readonly counters: CacheCounters = { hits: 0, misses: 0, s3Gets: 0, bytesFromS3: 0 };

  private constructor(private readonly options: SegmentCacheOptions) {
    this.lru = new LRUCache<string, Entry>({
      maxSize: options.budgetBytes,
      sizeCalculation: (entry) => Math.max(1, entry.bytes),
      dispose: (_entry, id, reason) => {
        if (reason === 'evict' || reason === 'delete') this.discard(id);
      },
    });
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
    // Oldest first, so the most recently written end up most recently used.
    for (const f of found.sort((a, b) => a.mtime - b.mtime)) cache.lru.set(f.id, { bytes: f.bytes });
    return cache;
  }

  get usedBytes(): number {
    return this.lru.calculatedSize;
  }

  get budgetBytes(): number {
    return this.options.budgetBytes;
  }

  has(id: string): boolean {
    return this.lru.has(id);
  }

  /** Segment ids in the cache, most recently used first. */
  ids(): string[] {
    return [...this.lru.keys()];
  }

  pathOf(id: string): string {
    return path.join(this.options.dir, `${id}.parquet`);
  }

  /**
   * Holds a segment for reading, fetching it from S3 on a miss. With `keep: false` (a segment this
   * node does not own) a miss reads it into a file of its own that release() deletes: it never
   * enters the cache, so it never evicts a segment this node owns.
   */
  async acquire(table: string, id: string, { keep = true }: { keep?: boolean } = {}): Promise<HeldSegment> {
    if (!keep && !this.has(id) && !this.inflight.has(id)) return await this.readThrough(table, id);
    this.pin(id);
    try {
      let hit = this.lru.has(id);
      let bytesFetched = 0;
      if (hit) {
        this.lru.get(id); // refresh recency
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
      return { path: this.pathOf(id), hit, bytesFetched, kept: true, release: () => this.unpin(id) };
    } catch (error) {
      this.unpin(id);
      throw error;
    }
  }

  private async readThrough(table: string, id: string): Promise<HeldSegment> {
    this.counters.misses++;
    const file = path.join(this.options.dir, `${id}.${Math.random().toString(36).slice(2)}.read-through`);
    try {
      const response = await this.options.s3.send(new GetObjectCommand({ Bucket: this.options.bucket, Key: segmentObjectKey(table, id) }));
      this.counters.s3Gets++;
      await pipeline(response.Body as Readable, createWriteStream(file));
      const { size } = await stat(file);
      this.counters.bytesFromS3 += size;
      return { path: file, hit: false, bytesFetched: size, kept: false, release: () => void rm(file, { force: true }) };
    } catch (error) {
      await rm(file, { force: true });
      throw new Error(`reading segment ${id} from S3 failed`, { cause: error });
    }
  }

  /** Fetches a segment into the cache only if it fits without evicting anything (the warmer). */
  async prefetch(table: string, id: string, bytes: number): Promise<boolean> {
    if (this.lru.has(id) || this.inflight.has(id)) return false;
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
      this.lru.set(id, { bytes: size });
      return size;
    } catch (error) {
      await rm(temp, { force: true });
      if (error instanceof HttpError) throw error; // the body broke a limit: the sender's fault
      throw new Error(`caching segment ${id} failed`, { cause: error });
    }
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

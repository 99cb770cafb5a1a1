/**
 * The node's disk cache of segment files: a byte budget, S3-FIFO eviction (core/s3-fifo.ts: a
 * scan larger than the cache passes through without flushing what queries keep reading, where
 * LRU would), and one fetch per segment however many scans miss on it at once.
 *
 * A scan may take a segment in part (segment-parts.ts): on a miss it fetches the Parquet footer
 * first, then only the column chunks its query reads, by ranged GETs, into a sparse file that
 * DuckDB reads as the object; a later query that reads more columns fetches only those. The
 * budget counts the bytes present. Pushes, the warmer and whole reads fetch whole files.
 *
 * Files a scan is reading are pinned: evicting one defers its deletion until the last reader lets
 * go. Every change to one segment's file runs under that segment's lock, in turn. The cache
 * survives a restart: the files on disk (and the part lists beside those held in part) are its
 * contents. The GETs themselves are segment-fetch.ts's.
 */
import { createWriteStream } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { S3Client } from '@aws-sdk/client-s3';
import pLimit from 'p-limit';
import type { DuckDBInstance } from '@duckdb/node-api';
import { S3Fifo } from '../../core/s3-fifo.js';
import { DomainError } from '../common/errors.js';
import type { AttachedObject } from '../meta/api.js';
import { SegmentObjects } from '../common/segment-objects.js';
import type { S3Profiles } from '../common/s3-client.js';
import { S3SegmentFetch, TAIL_BYTES, type SegmentFetch } from './segment-fetch.js';
import {
  bytesIn,
  coalesce,
  isWhole,
  missingRanges,
  normalise,
  readChunks,
  type Range,
  type SegmentParts,
} from './segment-parts.js';

export interface SegmentCacheOptions {
  dir: string;
  budgetBytes: number;
  s3: S3Client;
  bucket: string;
  /** Named S3 endpoints for the buckets of attached segments (BERTH_S3_PROFILES_FILE). */
  profiles?: S3Profiles;
  /** Reads Parquet footers, so that a scan can fetch a segment in part; without it every miss fetches whole files. */
  duckdb?: DuckDBInstance;
}

/** A segment file held for reading; call release() when done with it. */
export interface HeldSegment {
  path: string;
  /** True while nothing had to be fetched from S3 for this read. */
  hit: boolean;
  /** Bytes read from S3 to serve this read. */
  bytesFetched: number;
  /** False while the file holds only some columns (see ensure). */
  readonly complete: boolean;
  /** False when the file was read from S3 for this read only (acquire's `keep`): it is not in the cache. */
  readonly kept: boolean;
  /**
   * Fetches what the file lacks for a query whose scans DuckDB's plan describes with these
   * strings (the columns it projects and filters on); every column when undefined.
   */
  ensure(mentions?: readonly string[]): Promise<void>;
  release(): void;
}

export interface CacheCounters {
  hits: number;
  misses: number;
  s3Gets: number;
  bytesFromS3: number;
}

const PARTS_SUFFIX = '.parts';
/** Ranged GETs of one segment in flight at once (the scan fetches several segments side by side too). */
const RANGES_IN_FLIGHT = 4;

export class SegmentCache {
  private readonly policy: S3Fifo<string>;
  /** Each segment's lock: the tail of the chain of changes to its file. */
  private readonly locks = new Map<string, Promise<void>>();
  /** Segments on disk in part, with what they hold. */
  private readonly parts = new Map<string, SegmentParts>();
  private readonly pins = new Map<string, number>();
  /** Evicted while pinned: deleted on the last release. */
  private readonly doomed = new Set<string>();
  readonly counters: CacheCounters = { hits: 0, misses: 0, s3Gets: 0, bytesFromS3: 0 };
  private readonly fetch: SegmentFetch;
  /** Where the objects of attached segments lie, as the scans and the warmer that met them said. */
  private readonly attached = new Map<string, AttachedObject>();
  private readonly objects: SegmentObjects;

  private constructor(private readonly options: SegmentCacheOptions) {
    this.objects = new SegmentObjects({ s3: options.s3, bucket: options.bucket }, options.profiles);
    this.fetch = new S3SegmentFetch(this.objects, this.attached, this.counters);
    this.policy = new S3Fifo<string>({ maxSize: options.budgetBytes, onEvict: (id) => this.discard(id) });
  }

  /** Opens the cache, taking in what an earlier run left in the directory. */
  static async open(options: SegmentCacheOptions): Promise<SegmentCache> {
    await mkdir(options.dir, { recursive: true });
    const cache = new SegmentCache(options);
    const files = new Set(await readdir(options.dir));
    const found: { id: string; bytes: number; mtime: number }[] = [];
    for (const file of files) {
      const full = path.join(options.dir, file);
      if (file.endsWith(`.parquet${PARTS_SUFFIX}`) && files.has(file.slice(0, -PARTS_SUFFIX.length))) continue;
      if (!file.endsWith('.parquet')) {
        await rm(full, { force: true }); // a download cut short by a crash, or a part list without its file
        continue;
      }
      const id = file.slice(0, -'.parquet'.length);
      const info = await stat(full);
      let bytes = info.size;
      if (files.has(file + PARTS_SUFFIX)) {
        const parts = await readParts(full + PARTS_SUFFIX);
        if (!parts || parts.size !== info.size) {
          await rm(full, { force: true });
          await rm(full + PARTS_SUFFIX, { force: true });
          continue;
        }
        cache.parts.set(id, parts);
        bytes = bytesIn(parts.have);
      }
      found.push({ id, bytes, mtime: info.mtimeMs });
    }
    // Oldest first, so that the oldest are the first to leave.
    for (const f of found.sort((a, b) => a.mtime - b.mtime)) cache.keep(f.id, f.bytes);
    return cache;
  }

  /** Segments some reader holds right now (each released scan gives its pins back). */
  get pinnedSegments(): number {
    return this.pins.size;
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

  /** True when the segment is cached whole, not only its footer and some columns. */
  holdsWhole(id: string): boolean {
    return this.policy.has(id) && !this.parts.has(id);
  }

  /** Segment ids in the cache, whole or in part. */
  ids(): string[] {
    return this.policy.keys();
  }

  pathOf(id: string): string {
    return path.join(this.options.dir, `${id}.parquet`);
  }

  /** Notes where an attached segment's object lies, before it is acquired or prefetched. */
  locate(id: string, object: AttachedObject | undefined): void {
    if (object) this.attached.set(id, object);
  }

  /**
   * Holds a segment for reading, fetching it from S3 on a miss: whole, or with `partial` only its
   * footer when the cache can read footers (the caller then ensures the columns it reads). With
   * `keep: false` (a segment this node does not own) a miss reads it whole into a file of its own
   * that release() deletes: it never enters the cache, so it never evicts a segment this node owns.
   */
  async acquire(table: string, id: string, options: { partial?: boolean; keep?: boolean } = {}): Promise<HeldSegment> {
    if (options.keep === false && !this.policy.has(id) && !this.locks.has(id)) return await this.readThrough(table, id);
    this.pin(id);
    let released = false;
    const complete = () => !this.parts.has(id);
    const held: HeldSegment = {
      path: this.pathOf(id),
      hit: true,
      bytesFetched: 0,
      get complete() {
        return complete();
      },
      kept: true,
      ensure: async (mentions) =>
        this.fetched(held, await this.locked(id, () => this.fetchColumns(table, id, mentions))),
      release: () => {
        if (released) return;
        released = true;
        if (held.hit) this.counters.hits++;
        else this.counters.misses++;
        this.unpin(id);
      },
    };
    try {
      const partial = options.partial === true && this.options.duckdb !== undefined;
      if (!this.policy.hit(id) || (!partial && !complete())) {
        this.fetched(held, await this.locked(id, () => this.bring(table, id, partial)));
      }
      return held;
    } catch (error) {
      this.unpin(id);
      throw error;
    }
  }

  private async readThrough(table: string, id: string): Promise<HeldSegment> {
    const file = `${tempPath(this.pathOf(id))}.read-through`;
    try {
      await pipeline(await this.fetch.whole(table, id), createWriteStream(file, { mode: 0o600 }));
      const { size } = await stat(file);
      this.counters.bytesFromS3 += size;
      let released = false;
      return {
        path: file,
        hit: false,
        bytesFetched: size,
        complete: true,
        kept: false,
        ensure: async () => {},
        release: () => {
          if (released) return;
          released = true;
          this.counters.misses++;
          void rm(file, { force: true });
        },
      };
    } catch (error) {
      await rm(file, { force: true });
      throw new Error(`reading segment ${id} from S3 failed`, { cause: error });
    }
  }

  /**
   * Fetches a segment into the cache only if it fits without evicting anything (the warmer): whole,
   * or what a segment held in part still lacks.
   */
  async prefetch(table: string, id: string, bytes: number): Promise<boolean> {
    if (this.holdsWhole(id) || this.locks.has(id)) return false;
    const held = this.parts.has(id) ? bytesIn(this.parts.get(id)!.have) : 0;
    if (this.usedBytes - held + bytes > this.options.budgetBytes) return false;
    return (
      (await this.locked(id, () =>
        this.policy.has(id) ? this.fetchColumns(table, id, undefined) : this.fetchWhole(table, id),
      )) > 0
    );
  }

  /**
   * Fetches only a segment's footer (its index region: schema, row groups, column statistics) when
   * it fits without evicting anything, so that a first query plans without a round trip to S3.
   * False where the cache cannot hold segments in part, and for a segment no larger than the tail a
   * footer read fetches (it would come whole: that is prefetch's to do).
   */
  async prefetchFooter(table: string, id: string, bytes: number): Promise<boolean> {
    if (this.options.duckdb === undefined || bytes <= TAIL_BYTES || this.policy.has(id) || this.locks.has(id))
      return false;
    if (this.usedBytes + TAIL_BYTES > this.options.budgetBytes) return false;
    return (await this.locked(id, () => (this.policy.has(id) ? Promise.resolve(0) : this.fetchFooter(table, id)))) > 0;
  }

  /** Stores a pushed segment body. */
  put(id: string, body: Readable): Promise<number> {
    return this.locked(id, () => this.write(id, body));
  }

  private fetched(held: HeldSegment, bytes: number): void {
    if (bytes === 0) return;
    held.hit = false;
    held.bytesFetched += bytes;
  }

  /** Under the lock: makes the segment present (whole, or its footer when `partial`); the bytes fetched. */
  private async bring(table: string, id: string, partial: boolean): Promise<number> {
    if (this.policy.has(id)) return partial ? 0 : await this.fetchColumns(table, id, undefined); // fetched while we waited
    return partial ? await this.fetchFooter(table, id) : await this.fetchWhole(table, id);
  }

  private async fetchWhole(table: string, id: string): Promise<number> {
    const bytes = await this.write(id, await this.fetch.whole(table, id));
    this.counters.bytesFromS3 += bytes;
    return bytes;
  }

  /**
   * Under the lock: the object's tail (its footer, read again if longer than the tail), written at
   * its offset in a sparse file of the object's size, with the list of where its column chunks lie.
   */
  private async fetchFooter(table: string, id: string): Promise<number> {
    const footer = await this.fetch.footer(table, id);
    if ('whole' in footer) return await this.writeFetched(id, footer.whole, footer.fetched);
    const { size, tail, fetched } = footer;
    const final = this.pathOf(id);
    const temp = tempPath(final);
    try {
      const file = await open(temp, 'w', 0o600);
      try {
        await file.truncate(size);
        await file.write(tail, 0, tail.length, size - tail.length);
      } finally {
        await file.close();
      }
      const parts: SegmentParts = {
        size,
        chunks: await readChunks(this.options.duckdb!, temp),
        have: [[size - tail.length, size]],
      };
      // The part list first: a file without one would be taken for whole after a crash.
      await writeParts(final + PARTS_SUFFIX, parts);
      await rename(temp, final);
      this.parts.set(id, parts);
      this.doomed.delete(id);
      this.keep(id, tail.length);
      return fetched;
    } catch (error) {
      await rm(temp, { force: true });
      throw new Error(`caching segment ${id} in part failed`, { cause: error });
    }
  }

  /** Under the lock: fetches what a segment held in part lacks for these mentions (every column when undefined). */
  private async fetchColumns(table: string, id: string, mentions: readonly string[] | undefined): Promise<number> {
    const parts = this.parts.get(id);
    if (!parts) return 0;
    const missing = missingRanges(parts, mentions);
    if (missing.length === 0) return 0;
    const file = this.pathOf(id);
    let fetched = 0;
    const limit = pLimit(RANGES_IN_FLIGHT);
    const gets = await Promise.allSettled(
      coalesce(missing).map(([start, end]) =>
        limit(async () => {
          // Streamed into place: a range may be a large column chunk.
          const body = await this.fetch.range(table, id, [start, end], parts.size);
          const into = createWriteStream(file, { flags: 'r+', start });
          await pipeline(body, into);
          this.counters.bytesFromS3 += into.bytesWritten;
          fetched += into.bytesWritten;
          if (into.bytesWritten !== end - start)
            throw new Error(`segment ${id}: asked S3 for ${end - start} bytes at ${start}, got ${into.bytesWritten}`);
          parts.have = normalise([...parts.have, [start, end] as Range]);
        }),
      ),
    );
    const failed = gets.find((g) => g.status === 'rejected');
    if (failed) throw new Error(`fetching columns of segment ${id} failed`, { cause: failed.reason });
    if (isWhole(parts)) {
      await rm(file + PARTS_SUFFIX, { force: true });
      this.parts.delete(id);
    } else {
      await writeParts(file + PARTS_SUFFIX, parts);
    }
    if (this.policy.has(id)) this.keep(id, bytesIn(parts.have));
    return fetched;
  }

  /** A whole object that came back from a ranged GET, into place; the bytes fetched for it. */
  private async writeFetched(id: string, body: Buffer, fetched: number): Promise<number> {
    await this.write(id, Readable.from([body]));
    return fetched;
  }

  /** Under the lock: a whole file into place (a fetch, a push), replacing a file held in part. */
  private async write(id: string, body: Readable): Promise<number> {
    const final = this.pathOf(id);
    const temp = tempPath(final);
    try {
      await pipeline(body, createWriteStream(temp));
      const { size } = await stat(temp);
      await rename(temp, final);
      if (this.parts.delete(id)) await rm(final + PARTS_SUFFIX, { force: true });
      this.doomed.delete(id);
      this.keep(id, size);
      return size;
    } catch (error) {
      await rm(temp, { force: true });
      if (error instanceof DomainError) throw error; // the body broke a limit: the sender's fault
      throw new Error(`caching segment ${id} failed`, { cause: error });
    }
  }

  /** Hands a file on disk to the policy (again, when it grew); one larger than the whole budget is not kept. */
  private keep(id: string, bytes: number): void {
    if (!this.policy.set(id, Math.max(1, bytes)) && !this.doomed.has(id)) this.discard(id);
  }

  /** Runs `work` after every earlier change to this segment's file has settled. */
  private locked<T>(id: string, work: () => Promise<T>): Promise<T> {
    const run = (this.locks.get(id) ?? Promise.resolve()).then(work);
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.locks.set(id, settled);
    void settled.then(() => {
      if (this.locks.get(id) === settled) this.locks.delete(id);
    });
    return run;
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
    if (this.doomed.delete(id)) this.remove(id);
  }

  private discard(id: string): void {
    if (this.pins.has(id)) this.doomed.add(id);
    else this.remove(id);
  }

  private remove(id: string): void {
    this.parts.delete(id);
    const final = this.pathOf(id);
    void rm(final, { force: true });
    void rm(final + PARTS_SUFFIX, { force: true });
  }
}

const tempPath = (final: string) => `${final}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;

async function readParts(file: string): Promise<SegmentParts | undefined> {
  try {
    const parts = JSON.parse(await readFile(file, 'utf8')) as SegmentParts;
    return Number.isInteger(parts.size) && Array.isArray(parts.chunks) && Array.isArray(parts.have) ? parts : undefined;
  } catch {
    return undefined;
  }
}

/** Writes a part list by rename, so that a crash leaves the old list or the new, never half of one. */
async function writeParts(file: string, parts: SegmentParts): Promise<void> {
  const temp = tempPath(file);
  await writeFile(temp, JSON.stringify(parts), { mode: 0o600 });
  await rename(temp, file);
}

/**
 * The node's memory tier: segments it owns and scans again, held decoded as DuckDB tables.
 *
 * A scan of a table DuckDB holds in memory skips what a scan of Parquet pays every time (reading
 * pages, snappy, decoding): the interactive mix's scans of 3 segments cost 1.95 ms of CPU instead
 * of 3.8 (BENCHMARKS.md). A segment id names one immutable object, so a table made from its whole
 * file is never stale: the tier only decides what to keep.
 *
 * - Admission: a segment is loaded on its second offer (the first is only remembered), so a
 *   one-off scan over many segments loads none of them; the caller offers only segments it owns,
 *   whole on disk, and keeps the file until the load settles. A segment refused (larger than the
 *   budget) or whose load failed is not tried again while remembered. No load starts while the
 *   tables evicted but still read weigh a tenth of the budget, or while too many loads wait: what
 *   the tier holds passes its budget by at most that tenth and the one table being loaded.
 * - Eviction: S3-FIFO by bytes (core/s3-fifo.ts), as the disk cache. A table a scan is reading is
 *   held: evicting it defers its DROP until the last reader lets go.
 * - Bytes: what DuckDB's in-memory table storage grew by while the table was made (loads and drops
 *   run one at a time on the tier's own connection), and never less than the Parquet file's
 *   uncompressed size: the growth misleads when DuckDB moves table blocks to disk under memory
 *   pressure, or frees a dropped table's rows only when a finished scan's result is collected.
 */
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { LRUCache } from 'lru-cache';
import pLimit from 'p-limit';
import { quoteIdent } from '../../core/identifiers.js';
import { S3Fifo } from '../../core/s3-fifo.js';
import { sqlString } from '../common/duckdb.js';

export interface SegmentMemoryOptions {
  duckdb: DuckDBInstance;
  /** Bytes of tables held at once (see the header for what may pass it); 0 turns the tier off. */
  budgetBytes: number;
  /** Segments remembered: offered once, refused or failed. @default 4096 */
  rememberOffers?: number;
  /** Loads waiting at most; an offer past them is not taken. @default 64 */
  maxWaitingLoads?: number;
  /** A load that failed (the memory limit, a file DuckDB cannot read): the scan is unaffected. */
  onError?: (error: unknown, id: string) => void;
}

/** A held segment's table; release() when the scan that reads it is done. */
export interface HeldTable {
  /** The table's qualified SQL name. */
  sql: string;
  release(): void;
}

/** The schema holding the tier's tables: a scan's own names (WITH clauses, temp views) never shadow it. */
const SCHEMA = 'segment_memory';

export class SegmentMemory {
  private readonly policy: S3Fifo<string>;
  /** Offered once and not loaded: the next offer loads. */
  private readonly offered: LRUCache<string, true>;
  /** Refused (larger than the budget) or failed: not loaded again while remembered. */
  private readonly refused: LRUCache<string, true>;
  private readonly loading = new Map<string, Promise<void>>();
  private readonly holds = new Map<string, number>();
  /** Evicted while held, with their bytes: dropped on the last release, counted until then. */
  private readonly doomed = new Map<string, number>();
  private doomedBytes = 0;
  /** Loads and drops, one at a time (see the header on bytes). */
  private readonly serial = pLimit({ concurrency: 1, rejectOnClear: true });
  private closed = false;
  readonly counters = { loads: 0, refusedLoads: 0, failedLoads: 0, evictions: 0 };

  private constructor(
    private readonly options: SegmentMemoryOptions,
    private readonly connection: DuckDBConnection,
  ) {
    this.policy = new S3Fifo<string>({
      maxSize: options.budgetBytes,
      onEvict: (id, bytes) => this.evicted(id, bytes),
    });
    this.offered = new LRUCache({ max: options.rememberOffers ?? 4096 });
    this.refused = new LRUCache({ max: options.rememberOffers ?? 4096 });
  }

  static async open(options: SegmentMemoryOptions): Promise<SegmentMemory> {
    const connection = await options.duckdb.connect();
    await connection.run(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
    return new SegmentMemory(options, connection);
  }

  /** Bytes of the tables held, and of those evicted that scans still read. */
  get usedBytes(): number {
    return this.policy.usedSize + this.doomedBytes;
  }

  get budgetBytes(): number {
    return this.options.budgetBytes;
  }

  /** Segment ids held in memory (an evicted table a scan still reads is no longer among them). */
  ids(): string[] {
    return this.policy.keys();
  }

  /** The segment's table, held for reading, when the tier has it. */
  hold(id: string): HeldTable | undefined {
    if (!this.policy.hit(id)) return undefined;
    this.holds.set(id, (this.holds.get(id) ?? 0) + 1);
    let released = false;
    return {
      sql: tableSql(id),
      release: () => {
        if (released) return;
        released = true;
        const left = (this.holds.get(id) ?? 1) - 1;
        if (left > 0) return void this.holds.set(id, left);
        this.holds.delete(id);
        const bytes = this.doomed.get(id);
        if (bytes === undefined) return;
        this.doomed.delete(id);
        this.doomedBytes -= bytes;
        this.drop(id);
      },
    };
  }

  /**
   * Offers a segment the node owns, whole in the file at `path`: the second offer loads it. The
   * promise settles when the load has (it never rejects); keep the file until then.
   */
  offer(id: string, path: string): Promise<void> {
    // A doomed table is still read: it is dropped before it can come back.
    const taken = this.policy.has(id) || this.doomed.has(id) || this.refused.has(id);
    if (this.closed || this.options.budgetBytes <= 0 || taken) return Promise.resolve();
    const loading = this.loading.get(id);
    if (loading) return loading;
    if (!this.offered.has(id)) {
      this.offered.set(id, true);
      return Promise.resolve();
    }
    const full = this.doomedBytes >= this.options.budgetBytes / 10;
    if (full || this.serial.pendingCount >= (this.options.maxWaitingLoads ?? 64)) return Promise.resolve();
    const load = this.serial(() => this.load(id, path))
      .catch(() => {}) // cleared by close()
      .finally(() => this.loading.delete(id));
    this.loading.set(id, load);
    return load;
  }

  /** Stops loading; tables go with the DuckDB instance. Waits for the load under way. */
  async close(): Promise<void> {
    this.closed = true;
    this.serial.clearQueue();
    await this.serial(async () => {});
    this.connection.closeSync();
  }

  private async load(id: string, path: string): Promise<void> {
    if (this.closed) return;
    this.offered.delete(id);
    try {
      const [before, floor] = [await this.tableBytes(), await this.uncompressedBytes(path)];
      await this.connection.run(`CREATE TABLE ${tableSql(id)} AS SELECT * FROM read_parquet(${sqlString(path)})`);
      const bytes = Math.max(floor, (await this.tableBytes()) - before, 1);
      if (this.policy.set(id, bytes)) this.counters.loads++;
      else {
        this.counters.refusedLoads++;
        this.refused.set(id, true); // larger than the budget
        await this.connection.run(`DROP TABLE ${tableSql(id)}`);
      }
    } catch (error) {
      this.counters.failedLoads++;
      this.refused.set(id, true);
      await this.connection.run(`DROP TABLE IF EXISTS ${tableSql(id)}`).catch(() => {});
      this.options.onError?.(error, id);
    }
  }

  private evicted(id: string, bytes: number): void {
    this.counters.evictions++;
    if (!this.holds.has(id)) return this.drop(id);
    this.doomed.set(id, bytes);
    this.doomedBytes += bytes;
  }

  private drop(id: string): void {
    this.serial(async () => {
      if (this.closed) return;
      await this.connection
        .run(`DROP TABLE IF EXISTS ${tableSql(id)}`)
        .catch((error) => this.options.onError?.(error, id));
    }).catch(() => {}); // cleared by close(): the tables go with the instance
  }

  /** What the file's pages hold uncompressed: a table of its rows takes at least that. */
  private async uncompressedBytes(path: string): Promise<number> {
    const reader = await this.connection.runAndReadAll(
      `SELECT coalesce(sum(total_uncompressed_size), 0) FROM parquet_metadata(${sqlString(path)})`,
    );
    return Number(reader.getRows()[0]?.[0] ?? 0);
  }

  /** DuckDB's in-memory table storage, in bytes. */
  private async tableBytes(): Promise<number> {
    const reader = await this.connection.runAndReadAll(
      "SELECT memory_usage_bytes FROM duckdb_memory() WHERE tag = 'IN_MEMORY_TABLE'",
    );
    return Number(reader.getRows()[0]?.[0] ?? 0);
  }
}

const tableSql = (id: string): string => `${SCHEMA}.${quoteIdent(id)}`;

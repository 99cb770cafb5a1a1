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
 *   whole on disk, and keeps the file until the load settles.
 * - Eviction: S3-FIFO by bytes (core/s3-fifo.ts), as the disk cache. A table a scan is reading is
 *   held: evicting it defers its DROP until the last reader lets go.
 * - Bytes: what DuckDB's in-memory table storage grew by while the table was made. Loads and drops
 *   run one at a time on the tier's own connection, so that growth is the table's.
 */
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { LRUCache } from 'lru-cache';
import pLimit from 'p-limit';
import { quoteIdent } from '../../core/identifiers.js';
import { S3Fifo } from '../../core/s3-fifo.js';
import { sqlString } from '../common/duckdb.js';

export interface SegmentMemoryOptions {
  duckdb: DuckDBInstance;
  /** Bytes of tables held at once (one load may pass it until the eviction it causes); 0 turns the tier off. */
  budgetBytes: number;
  /** Segments offered once that are remembered for their second offer. @default 4096 */
  rememberOffers?: number;
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
  private readonly loading = new Map<string, Promise<void>>();
  private readonly holds = new Map<string, number>();
  /** Evicted while held: dropped on the last release. */
  private readonly doomed = new Set<string>();
  /** Loads and drops, one at a time (see the header on bytes). */
  private readonly serial = pLimit(1);
  private closed = false;
  readonly counters = { loads: 0, failedLoads: 0, evictions: 0 };

  private constructor(
    private readonly options: SegmentMemoryOptions,
    private readonly connection: DuckDBConnection,
  ) {
    this.policy = new S3Fifo<string>({ maxSize: options.budgetBytes, onEvict: (id) => this.evicted(id) });
    this.offered = new LRUCache({ max: options.rememberOffers ?? 4096 });
  }

  static async open(options: SegmentMemoryOptions): Promise<SegmentMemory> {
    const connection = await options.duckdb.connect();
    await connection.run(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
    return new SegmentMemory(options, connection);
  }

  /** Bytes of the tables held. */
  get usedBytes(): number {
    return this.policy.usedSize;
  }

  get budgetBytes(): number {
    return this.options.budgetBytes;
  }

  /** Segment ids held in memory. */
  ids(): string[] {
    return this.policy.keys().filter((id) => !this.doomed.has(id));
  }

  /** The segment's table, held for reading, when the tier has it. */
  hold(id: string): HeldTable | undefined {
    if (this.doomed.has(id) || !this.policy.hit(id)) return undefined;
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
        if (this.doomed.delete(id)) this.drop(id);
      },
    };
  }

  /**
   * Offers a segment the node owns, whole in the file at `path`: the second offer loads it. The
   * promise settles when the load has (it never rejects); keep the file until then.
   */
  offer(id: string, path: string): Promise<void> {
    if (this.closed || this.options.budgetBytes <= 0 || this.policy.has(id) || this.doomed.has(id)) {
      return Promise.resolve(); // a doomed table is still read: it is dropped before it can come back
    }
    const loading = this.loading.get(id);
    if (loading) return loading;
    if (!this.offered.has(id)) {
      this.offered.set(id, true);
      return Promise.resolve();
    }
    const load = this.serial(() => this.load(id, path)).finally(() => this.loading.delete(id));
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
    if (this.closed || this.policy.has(id)) return;
    this.offered.delete(id);
    try {
      const before = await this.tableBytes();
      await this.connection.run(`CREATE TABLE ${tableSql(id)} AS SELECT * FROM read_parquet(${sqlString(path)})`);
      const bytes = Math.max(1, (await this.tableBytes()) - before);
      if (!this.policy.set(id, bytes))
        await this.connection.run(`DROP TABLE ${tableSql(id)}`); // larger than the budget
      else this.counters.loads++;
    } catch (error) {
      this.counters.failedLoads++;
      await this.connection.run(`DROP TABLE IF EXISTS ${tableSql(id)}`).catch(() => {});
      this.options.onError?.(error, id);
    }
  }

  private evicted(id: string): void {
    this.counters.evictions++;
    if (this.holds.has(id)) this.doomed.add(id);
    else this.drop(id);
  }

  private drop(id: string): void {
    void this.serial(async () => {
      if (this.closed || this.policy.has(id)) return; // loaded again since
      await this.connection
        .run(`DROP TABLE IF EXISTS ${tableSql(id)}`)
        .catch((error) => this.options.onError?.(error, id));
    });
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

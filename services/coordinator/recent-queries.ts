/**
 * The last queries the coordinator answered or refused over HTTP, with their SQL and stats, for
 * the console's Queries view. Separate from the query log (query-log.ts), which keeps no SQL and
 * many more entries: this one is small, in memory, and read only with the cluster token.
 */
import type { QueryStats, RecentQuery } from './api.js';

/** Queries kept; the oldest go first. */
export const DEFAULT_RECENT_QUERIES = 200;
/** SQL longer than this is kept cut, so the ring's memory stays bounded. */
const MAX_SQL_CHARS = 10_000;

export class RecentQueryLog {
  private readonly ring: RecentQuery[] = [];
  private lastId = 0;

  constructor(readonly capacity = DEFAULT_RECENT_QUERIES) {}

  /** `rows` is unknown for an answer streamed as NDJSON. */
  answered(sql: string, rows: number | undefined, stats: QueryStats): void {
    this.add({ sql, at: Date.now(), ...(rows === undefined ? {} : { rows }), stats });
  }

  failed(sql: string, error: Error): void {
    this.add({ sql, at: Date.now(), error: error.message });
  }

  /** Newest first. */
  list(): RecentQuery[] {
    return [...this.ring].reverse();
  }

  private add(entry: Omit<RecentQuery, 'id'>): void {
    const sql = entry.sql.length > MAX_SQL_CHARS ? `${entry.sql.slice(0, MAX_SQL_CHARS)}…` : entry.sql;
    this.ring.push({ id: ++this.lastId, ...entry, sql });
    if (this.ring.length > this.capacity) this.ring.shift();
  }
}

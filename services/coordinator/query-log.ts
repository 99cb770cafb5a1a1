/**
 * The coordinator's query log: the last N answered queries' sizes, times and where they ran, in
 * memory and bounded (a ring), for compute concentration (`berth cost`). It holds no SQL and no
 * rows; a restart starts it afresh, and each coordinator logs the queries it answered.
 */
import type { LoggedQuery } from '../../core/compute-concentration.js';

/** Queries the log keeps unless the coordinator is told otherwise. */
export const DEFAULT_QUERY_LOG_SIZE = 10_000;

export class QueryLog {
  private readonly ring: LoggedQuery[] = [];
  private next = 0;

  /** @param capacity the most queries kept; the oldest go first. */
  constructor(readonly capacity = DEFAULT_QUERY_LOG_SIZE) {}

  record(query: LoggedQuery): void {
    if (this.capacity <= 0) return;
    if (this.ring.length < this.capacity) this.ring.push(query);
    else this.ring[this.next] = query;
    this.next = (this.next + 1) % this.capacity;
  }

  /** The kept queries answered at or after `since`, oldest first. */
  entries(since = 0): LoggedQuery[] {
    const ordered =
      this.ring.length < this.capacity ? this.ring : [...this.ring.slice(this.next), ...this.ring.slice(0, this.next)];
    return ordered.filter((q) => q.at >= since);
  }
}

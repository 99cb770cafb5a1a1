/**
 * Answers kept for queries asked again over unchanged tables: a dashboard's panels refreshing.
 * An answer is keyed by the statement (as the plan cache keys it: DuckDB's parse) and the version of every
 * table the query reads, as of the version check that began after the query arrived. Segments
 * are immutable and a table's manifest version moves with every commit, swap and retirement (its
 * schema digest with its schema), so the same key means the same rows in the same files: the
 * answer is what running the query again would compute. Only queries whose every function is
 * consistent (no now(), random(), samples) are kept. Bounded by the memory the answers hold,
 * least recently used out first. Off unless given a budget, as Doris's SQL cache and ClickHouse's query cache are.
 */
import { LRUCache } from 'lru-cache';
import type { TableVersion } from '../../meta/client.js';
import type { QueryResult } from '../api.js';

/** The result cache's budget unless the coordinator is told otherwise: off. */
export const DEFAULT_RESULT_CACHE_BYTES = 0;

export class ResultCache {
  /** Each answer as JSON text: its size is what it holds, and no caller can change a kept answer. */
  private readonly answers: LRUCache<string, string> | undefined;
  private readonly maxEntryBytes: number;

  /** `maxBytes`: the memory the kept answers may hold in all (two bytes a character); 0 turns the cache off. An answer past an eighth of it is not kept. */
  constructor(readonly maxBytes: number) {
    this.maxEntryBytes = Math.max(1, Math.floor(maxBytes / 8));
    this.answers = maxBytes > 0 ? new LRUCache({ maxSize: maxBytes, maxEntrySize: this.maxEntryBytes }) : undefined;
  }

  /** The key of a statement (CachedPlan.statement) over tables at these versions, or undefined when its answer may not be kept. */
  key(statement: string, versions: ReadonlyMap<string, TableVersion>, reusable: boolean): string | undefined {
    if (!this.answers || !reusable) return undefined;
    const tables = [...versions].sort(([a], [b]) => (a < b ? -1 : 1));
    return JSON.stringify([statement, tables.map(([name, v]) => [name, v.manifest, v.schema])]);
  }

  /** A kept answer, a copy of its own. */
  get(key: string | undefined): QueryResult | undefined {
    const text = key === undefined ? undefined : this.answers?.get(key);
    return text === undefined ? undefined : (JSON.parse(text) as QueryResult);
  }

  /** Keeps an answer; `rowBytes`, its rows' JSON size, spares serializing one too large to keep. */
  set(key: string | undefined, result: QueryResult, rowBytes: number): void {
    if (key === undefined || !this.answers || 2 * rowBytes > this.maxEntryBytes) return;
    const text = JSON.stringify(result);
    const size = 2 * (text.length + key.length);
    if (size <= this.maxEntryBytes) this.answers.set(key, text, { size });
  }

  get size(): { answers: number; bytes: number } {
    return { answers: this.answers?.size ?? 0, bytes: this.answers?.calculatedSize ?? 0 };
  }
}

/**
 * Answers kept for queries asked again over unchanged tables: a dashboard's panels refreshing.
 * An answer is keyed by the SQL (normalized as the plan cache does) and the version of every
 * table the query reads, as of the version check that began after the query arrived. Segments
 * are immutable and a table's manifest version moves with every commit, swap and retirement (its
 * schema digest with its schema), so the same key means the same rows in the same files: the
 * answer is what running the query again would compute. Only queries whose every function is
 * consistent (no now(), random()) are kept. Bounded by the answers' JSON bytes, least recently
 * used out first. Off unless given a budget, as Doris's SQL cache and ClickHouse's query cache are.
 */
import { LRUCache } from 'lru-cache';
import type { TableVersion } from '../meta/client.js';
import type { QueryResult } from './api.js';
import { normalizeSql } from './plan-cache.js';

export class ResultCache {
  private readonly answers: LRUCache<string, QueryResult> | undefined;

  /** `maxBytes`: the answers' JSON bytes kept in all; 0 turns the cache off. An answer past an eighth of it is not kept. */
  constructor(readonly maxBytes: number) {
    this.answers =
      maxBytes > 0
        ? new LRUCache({ maxSize: maxBytes, maxEntrySize: Math.max(1, Math.floor(maxBytes / 8)) })
        : undefined;
  }

  /** The key of `sql` over tables at these versions, or undefined when its answer may not be kept. */
  key(sql: string, versions: ReadonlyMap<string, TableVersion>, reusable: boolean): string | undefined {
    if (!this.answers || !reusable) return undefined;
    const tables = [...versions].sort(([a], [b]) => (a < b ? -1 : 1));
    return JSON.stringify([normalizeSql(sql), tables.map(([name, v]) => [name, v.manifest, v.schema])]);
  }

  get(key: string | undefined): QueryResult | undefined {
    return key === undefined ? undefined : this.answers?.get(key);
  }

  /** Keeps an answer; `bytes` is its rows' JSON size. */
  set(key: string | undefined, result: QueryResult, bytes: number): void {
    if (key === undefined || !this.answers) return;
    // lru-cache refuses (and counts nothing for) an entry past maxEntrySize.
    this.answers.set(key, result, { size: Math.max(1, bytes + key.length) });
  }

  get size(): { answers: number; bytes: number } {
    return { answers: this.answers?.size ?? 0, bytes: this.answers?.calculatedSize ?? 0 };
  }
}

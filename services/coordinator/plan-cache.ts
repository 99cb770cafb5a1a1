/**
 * Plans once per query text and table schemas: a dashboard that sends the same query again gets
 * the plan it got before, without the dozen round trips through the coordinator's DuckDB that
 * planning takes (parse, bind, split, write back, time bounds). An entry is keyed by the SQL with
 * its whitespace normalized and holds the schema digest of every table the plan read; it is used
 * only while each of those tables still has that digest (checked at every query, with the
 * table's manifest version, by the TableCatalog), so a schema change plans again. Plans that
 * depend on more than the SQL and the schemas (a time bound with now()) are never kept.
 */
import { LRUCache } from 'lru-cache';
import type { TableInfo, TableVersion } from '../meta/client.js';
import type { ExecutablePlan, Planner } from './planner.js';
import type { TableCatalog } from './table-catalog.js';

export interface CachedPlan {
  plan: ExecutablePlan;
  /** Each table the plan reads, as of a version check that began after the query arrived. */
  versions: Map<string, TableVersion>;
  /** Whether the plan came from the cache. */
  cached: boolean;
}

interface Entry {
  plan: ExecutablePlan;
  /** Schema digest per table name. */
  schemas: Map<string, string>;
}

export interface PlanCacheOptions {
  planner: Planner;
  catalog: TableCatalog;
  /** Plans kept; 0 turns the cache off. @default 1000 */
  maxEntries?: number;
}

export class PlanCache {
  private readonly entries: LRUCache<string, Entry> | undefined;

  constructor(private readonly options: PlanCacheOptions) {
    const max = options.maxEntries ?? 1000;
    this.entries = max > 0 ? new LRUCache({ max }) : undefined;
  }

  async plan(sql: string): Promise<CachedPlan> {
    const key = normalizeSql(sql);
    const entry = this.entries?.get(key);
    if (entry) {
      const names = [...entry.schemas.keys()];
      const tables = await Promise.all(names.map((name) => this.options.catalog.table(name)));
      if (tables.every((t, i) => t && t.version.schema === entry.schemas.get(names[i]!))) {
        return { plan: entry.plan, versions: new Map(tables.map((t, i) => [names[i]!, t!.version])), cached: true };
      }
    }
    const versions = new Map<string, TableVersion>();
    const schemas = new Map<string, string>();
    const plan = await this.options.planner.plan(sql, async (name): Promise<TableInfo | undefined> => {
      const table = await this.options.catalog.table(name);
      if (table) {
        versions.set(name, table.version);
        schemas.set(name, table.version.schema);
      }
      return table?.info;
    });
    if (plan.reusable) this.entries?.set(key, { plan, schemas });
    else this.entries?.delete(key);
    return { plan, versions, cached: false };
  }
}

/**
 * The SQL with every run of whitespace outside quotes and comments made one space, and the ends
 * trimmed: the same query however it is laid out. Text this cannot read with certainty (a
 * backslash or dollar sign, which can change where a string ends) is kept as it is.
 */
export function normalizeSql(sql: string): string {
  if (/[\\$]/.test(sql)) return sql;
  let out = '';
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    const end =
      c === "'" || c === '"'
        ? sql.indexOf(c, i + 1)
        : sql.startsWith('--', i)
          ? sql.indexOf('\n', i)
          : sql.startsWith('/*', i)
            ? sql.indexOf('*/', i + 2) + 1
            : -2;
    if (end === -2) {
      if (/\s/.test(c)) {
        while (i < sql.length && /\s/.test(sql[i]!)) i++;
        out += ' ';
      } else {
        out += c;
        i++;
      }
      continue;
    }
    // A quoted name, a string (a doubled quote inside is two strings in a row) or a comment, kept whole.
    const stop = end < 0 || (end === 0 && c === '/') ? sql.length : end + 1;
    out += sql.slice(i, stop);
    i = stop;
  }
  return out.trim();
}

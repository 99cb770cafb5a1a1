/**
 * Plans once per statement and table schemas: a dashboard that sends the same query again gets
 * the plan it got before, without the dozen round trips through the coordinator's DuckDB that
 * planning takes (parse, bind, split, write back, time bounds). An entry is keyed by the
 * statement as DuckDB parses it (its parse tree without positions), so layout and comments do
 * not matter and two statements DuckDB reads differently never share a plan; the text a key was
 * made from is remembered too, so the same text again needs no parse. An entry holds the schema
 * digest of every table the plan read, and is used only while each of those tables still has
 * that digest (checked at every query, with the table's manifest version, by the TableCatalog),
 * so a schema change plans again. Plans that depend on more than the statement and the schemas
 * (a time bound with now()) are never kept.
 */
import { LRUCache } from 'lru-cache';
import type { TableInfo, TableVersion } from '../../meta/client.js';
import { writeParseTree } from './parse-tree-json.js';
import type { ExecutablePlan } from '../stages.js';
import type { Planner } from './planner.js';
import type { SqlBinder } from './sql-binder.js';
import type { TableCatalog } from './table-catalog.js';

export interface CachedPlan {
  plan: ExecutablePlan;
  /** The statement as DuckDB parses it: the same for the same query however it is written. */
  statement: string;
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
  /** Parses a statement for its key. */
  engine: Pick<SqlBinder, 'parse'>;
  catalog: TableCatalog;
  /** Plans kept; 0 turns the cache off. @default 1000 */
  maxEntries?: number;
}

/** Plans kept unless the coordinator is told otherwise. */
export const DEFAULT_PLAN_CACHE_ENTRIES = 1000;

export class PlanCache {
  private readonly entries: LRUCache<string, Entry> | undefined;
  /** Each SQL text seen, exactly as sent, to its statement's key. */
  private readonly statements: LRUCache<string, string> | undefined;

  constructor(private readonly options: PlanCacheOptions) {
    const max = options.maxEntries ?? DEFAULT_PLAN_CACHE_ENTRIES;
    this.entries = max > 0 ? new LRUCache({ max }) : undefined;
    this.statements = max > 0 ? new LRUCache({ max }) : undefined;
  }

  async plan(sql: string): Promise<CachedPlan> {
    const statement = await this.statementOf(sql);
    const entry = this.entries?.get(statement);
    if (entry) {
      const names = [...entry.schemas.keys()];
      const tables = await Promise.all(names.map((name) => this.options.catalog.table(name)));
      if (tables.every((t, i) => t && t.version.schema === entry.schemas.get(names[i]!))) {
        const versions = new Map(tables.map((t, i) => [names[i]!, t!.version]));
        return { plan: entry.plan, statement, versions, cached: true };
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
    if (plan.reusable) this.entries?.set(statement, { plan, schemas });
    else this.entries?.delete(statement);
    return { plan, statement, versions, cached: false };
  }

  /** The key of `sql`'s statement: DuckDB's parse tree without positions, remembered by the text. */
  private async statementOf(sql: string): Promise<string> {
    const known = this.statements?.get(sql);
    if (known !== undefined) return known;
    const statement = writeParseTree(await this.options.engine.parse(sql));
    this.statements?.set(sql, statement);
    return statement;
  }
}

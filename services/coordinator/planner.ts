/**
 * Turns SQL into an executable plan: checks it (syntax, relations, binding) with DuckDB, picks the
 * shape (core/query-plan), and produces the SQL each node runs, the SQL the coordinator finishes
 * with, and each table's time window for pruning. Anything the decomposition cannot express
 * exactly (same values, same types) falls back to gathering on one backend: correctness first.
 *
 * What runs is always SQL written back from the tree that was checked, never the text as sent: a
 * trailing comment or semicolon cannot change it, and no relation can appear that the check did
 * not see.
 */
import { PARTIALS_TABLE, planQuery, referencedRelations, type AstNode, type TimeBounds } from '../../core/query-plan.js';
import { quoteIdent, TABLE_NAME } from '../../core/identifiers.js';
import { badRequest, HttpError } from '../common/errors.js';
import type { TableInfo } from '../meta/client.js';
import type { BoundColumn, SqlEngine } from './sql-engine.js';

export type Route = 'aggregate' | 'select' | 'gather';

export interface TimeWindow {
  from?: number;
  to?: number;
}

/**
 * A column of what the backends send back. Parquet does not keep every DuckDB type (a HUGEINT
 * comes back a DOUBLE, a TIMESTAMP_MS a TIMESTAMP, an ENUM a VARCHAR): those columns travel as
 * text and are cast back to their type at the coordinator, which is exact.
 */
export interface ExchangeColumn {
  /** The column's name in `__partials`. */
  name: string;
  type: string;
  /** Sent as VARCHAR (column `c<i>` of the backend's result) and cast back. */
  asText: boolean;
}

export interface ExecutablePlan {
  route: Route;
  /** Why the query gathers on one backend. */
  reason?: string;
  tables: TableInfo[];
  /** What each backend runs over its segments; its columns are `c0`, `c1`, … */
  nodeSql: string;
  /** The columns of the backends' results, as `__partials` presents them to `finalSql`. */
  exchange: ExchangeColumn[];
  /** What the coordinator runs over the backends' results (the `__partials` table). */
  finalSql: string;
  /** Time window per table name, for pruning segments by the manifest's min/max. */
  windows: Map<string, TimeWindow>;
  columns: BoundColumn[];
}

export class Planner {
  constructor(
    private readonly engine: SqlEngine,
    private readonly lookupTable: (name: string) => Promise<TableInfo | undefined>,
  ) {}

  async plan(sql: string): Promise<ExecutablePlan> {
    const node = await this.engine.parse(sql);
    if (!['SELECT_NODE', 'SET_OPERATION_NODE'].includes(node.type)) throw badRequest('invalid_sql', 'only SELECT queries are supported');
    const refs = referencedRelations(node);
    if (refs.forbidden.length > 0) {
      throw badRequest('forbidden_relation', `only Berth's tables can be queried, by name; not allowed: ${refs.forbidden.join(', ')}`);
    }
    const tables: TableInfo[] = [];
    for (const name of refs.tables) {
      const table = TABLE_NAME.test(name.toLowerCase()) ? await this.lookupTable(name.toLowerCase()) : undefined;
      if (!table) throw badRequest('unknown_table', `unknown table "${name}"`);
      tables.push(table);
    }
    const checked = await this.deparse(node);
    // Names and types are those of the query as sent; what runs must give the same types.
    const columns = await this.bind(sql, tables);
    const runs = await this.bind(checked, tables);
    if (runs.some((c, i) => c.type !== columns[i]?.type)) {
      throw badRequest('unsupported_sql', `Berth cannot run this query exactly: written back, its columns would be ${runs.map((c) => c.type).join(', ')} instead of ${columns.map((c) => c.type).join(', ')}`);
    }
    const gather = (reason: string, bounds = new Map<string, TimeBounds>()) => this.gatherPlan(checked, tables, columns, reason, bounds);

    const shape = planQuery({
      node,
      tables: new Map(tables.map((t) => [t.name, { timestampColumn: t.timestampColumn, columns: t.columns.map((c) => c.name) }])),
      aggregateFunctions: this.engine.aggregateFunctions,
      outputColumns: columns.map((c) => c.name),
    });
    if (shape.kind === 'gather') return await gather(shape.reason, shape.bounds);

    try {
      const table = tables[0]!;
      const partialSql = await this.engine.deparse(shape.partial);
      const partialColumns = await this.engine.describe(partialSql, [table]);
      // A select's partial has the query's own columns; an aggregate's has the partials' aliases.
      const exchange = exchangeColumns(partialColumns, (c, i) => (shape.kind === 'select' ? columns[i]!.name : c.name));
      const finalSql = await this.engine.deparse(shape.final);
      const finalColumns = await this.engine.describe(finalSql, [{ name: PARTIALS_TABLE, columns: exchange }]);
      if (finalColumns.length !== columns.length || finalColumns.some((c, i) => c.type !== columns[i]!.type || c.name !== columns[i]!.name)) {
        return await gather('the decomposed plan would not give the same columns and types');
      }
      return {
        route: shape.kind,
        tables,
        nodeSql: exchangeSql(partialSql, partialColumns),
        exchange,
        finalSql,
        windows: new Map([[table.name, await this.window(shape.bounds)]]),
        columns,
      };
    } catch (error) {
      if (error instanceof HttpError) throw error;
      return await gather(`the decomposed plan did not bind (${(error as Error).message.split('\n')[0]})`);
    }
  }

  /** The checked tree as SQL; a tree DuckDB cannot write back is a query Berth cannot run. */
  private async deparse(node: AstNode): Promise<string> {
    try {
      return await this.engine.deparse(node);
    } catch (error) {
      throw badRequest('unsupported_sql', `Berth cannot run this query: ${(error as Error).message.split('\n')[0]}`);
    }
  }

  /** Binds the query against the tables' schemas; DuckDB's error becomes a 400. */
  private async bind(sql: string, tables: TableInfo[]): Promise<BoundColumn[]> {
    try {
      return await this.engine.describe(sql, tables);
    } catch (error) {
      throw badRequest('invalid_sql', (error as Error).message);
    }
  }

  private async gatherPlan(sql: string, tables: TableInfo[], columns: BoundColumn[], reason: string, bounds: Map<string, TimeBounds>): Promise<ExecutablePlan> {
    const windows = new Map<string, TimeWindow>();
    for (const [name, b] of bounds) windows.set(name, await this.window(b));
    // Column names may repeat in a result; in __partials they are c0, c1, ... and get theirs back at the end.
    const finalSql = `SELECT ${columns.map((c, i) => `c${i} AS ${quoteIdent(c.name)}`).join(', ')} FROM ${quoteIdent(PARTIALS_TABLE)}`;
    return { route: 'gather', reason, tables, nodeSql: exchangeSql(sql, columns), exchange: exchangeColumns(columns, (_, i) => `c${i}`), finalSql, windows, columns };
  }

  /** The window the bounds describe; a bound DuckDB cannot read as a timestamp prunes nothing. */
  private async window(bounds: TimeBounds): Promise<TimeWindow> {
    const lower = await this.engine.epochMillis(bounds.lower).catch(() => []);
    const upper = await this.engine.epochMillis(bounds.upper).catch(() => []);
    return {
      from: lower.length > 0 ? Math.max(...lower) : undefined,
      to: upper.length > 0 ? Math.min(...upper) : undefined,
    };
  }
}

/** Types that do not come back from Parquet as they went in (see ExchangeColumn). */
const CHANGED_BY_PARQUET = /\b(U?HUGEINT|TIMESTAMP_S|TIMESTAMP_MS|TIME WITH TIME ZONE|BIT|BIGNUM|VARINT)\b|\bENUM\(|\[\d+\]/;

const exchangeColumns = (columns: BoundColumn[], name: (c: BoundColumn, i: number) => string): ExchangeColumn[] =>
  columns.map((c, i) => ({ name: name(c, i), type: c.type, asText: CHANGED_BY_PARQUET.test(c.type) }));

/** What a backend runs: the query, its columns renamed c0, c1, ... and the ones Parquet would change sent as text. */
function exchangeSql(sql: string, columns: BoundColumn[]): string {
  const names = columns.map((_, i) => `c${i}`);
  const select = columns.map((c, i) => (CHANGED_BY_PARQUET.test(c.type) ? `CAST(c${i} AS VARCHAR) AS c${i}` : `c${i}`));
  return `SELECT ${select.join(', ')} FROM (${sql}) AS __exchange(${names.join(', ')})`;
}

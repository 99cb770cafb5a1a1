/**
 * Turns SQL into an executable plan: checks it (syntax, tables, binding) with DuckDB, picks the
 * shape (core/query-plan), and produces the SQL each node runs, the SQL the coordinator finishes
 * with, and each table's time window for pruning. Anything the decomposition cannot express
 * exactly falls back to gathering on one backend: correctness first.
 */
import { castToDecimal38, PARTIALS_TABLE, planQuery, referencedTables, type AstNode, type TimeBounds } from '../../core/query-plan.js';
import { quoteIdent } from '../../core/identifiers.js';
import { badRequest, HttpError } from '../common/errors.js';
import type { TableInfo } from '../meta/client.js';
import type { BoundColumn, SqlEngine } from './sql-engine.js';

export type Route = 'aggregate' | 'select' | 'gather';

export interface TimeWindow {
  from?: number;
  to?: number;
}

export interface ExecutablePlan {
  route: Route;
  /** Why the query gathers on one backend. */
  reason?: string;
  tables: TableInfo[];
  /** What each backend runs over its segments. */
  nodeSql: string;
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
    const refs = referencedTables(node);
    if (refs.tableFunctions.length > 0) {
      throw badRequest('invalid_sql', `table functions are not allowed (${refs.tableFunctions.join(', ')}): query tables by name`);
    }
    const tables: TableInfo[] = [];
    for (const name of refs.tables) {
      const table = await this.lookupTable(name.toLowerCase());
      if (!table) throw badRequest('unknown_table', `unknown table "${name}"`);
      tables.push(table);
    }
    const columns = await this.bind(sql, tables);
    const gather = (reason: string, bounds = new Map<string, TimeBounds>()) => this.gatherPlan(sql, tables, columns, reason, bounds);

    const shape = planQuery({
      node,
      tables: new Map(tables.map((t) => [t.name, { timestampColumn: t.timestampColumn, columns: t.columns.map((c) => c.name) }])),
      aggregateFunctions: this.engine.aggregateFunctions,
      outputColumns: columns.map((c) => c.name),
    });
    if (shape.kind === 'gather') return await gather(shape.reason, shape.bounds);

    try {
      const table = tables[0]!;
      let partial = shape.partial;
      let partialColumns = await this.engine.describe(await this.engine.deparse(partial), [table]);
      // Parquet has no 128-bit integers: send wide sums as DECIMAL(38,0).
      if (partialColumns.some((c) => /HUGEINT/.test(c.type))) {
        partial = { ...partial, select_list: (partial.select_list as AstNode[]).map((item, i) => (/HUGEINT/.test(partialColumns[i]!.type) ? castToDecimal38(item) : item)) };
        partialColumns = await this.engine.describe(await this.engine.deparse(partial), [table]);
      }
      const nodeSql = await this.engine.deparse(partial);
      const finalSql = await this.engine.deparse(shape.final);
      await this.engine.describe(finalSql, [{ name: PARTIALS_TABLE, columns: partialColumns }]);
      return { route: shape.kind, tables, nodeSql, finalSql, windows: new Map([[table.name, await this.window(shape.bounds)]]), columns };
    } catch (error) {
      if (error instanceof HttpError) throw error;
      return await gather(`the decomposed plan did not bind (${(error as Error).message.split('\n')[0]})`);
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
    return { route: 'gather', reason, tables, nodeSql: sql, finalSql: `SELECT * FROM ${quoteIdent(PARTIALS_TABLE)}`, windows, columns };
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

/**
 * Turns SQL into an executable plan in two stages: for every read of a catalog table, the SQL its
 * segments' owners run (a partial aggregate, a distinct or top-k select, or the columns the query
 * names filtered by the conjuncts that only need the row: core/query-plan), and the SQL the final
 * stage runs over what they send. It checks the SQL (syntax, relations, binding) with DuckDB, and
 * keeps a decomposition only when the final stage gives exactly the columns and types the query
 * itself would: correctness first, then the less the owners send the better.
 *
 * What runs is always SQL written back from the tree that was checked, never the text as sent: a
 * trailing comment or semicolon cannot change it, and no relation can appear that the check did
 * not see.
 */
import {
  inputTable,
  namedColumns,
  planQuery,
  pushableConjuncts,
  referencedRelations,
  replaceNodes,
  rowsSelect,
  selfContained,
  tableReads,
  timeBounds,
  walk,
  type AstNode,
  type TableRead,
  type TimeBounds,
} from '../../core/query-plan.js';
import { TABLE_NAME } from '../../core/identifiers.js';
import { badRequest, DomainError } from '../common/errors.js';
import type { TableInfo } from '../meta/client.js';
import type { BoundColumn, SqlEngine } from './sql-engine.js';
import type { Route, ScanKind } from './api.js';

/**
 * How a query runs, in one word: `aggregate` (one read, a partial aggregate on each owner),
 * `select` (one read, a select on each owner: distinct rows or top-k), or `stages` (any other
 * shape: the final stage runs the query's own SQL over what each read's owners send).
 */
export type { Route };

/** What the owners of one read's segments do: see core/query-plan. */
export type { ScanKind };

export interface TimeWindow {
  from?: number;
  to?: number;
}

/**
 * A column of what the owners send. The exchange carries every type exactly as DuckDB holds it
 * except a few (ENUM, UNION and the like): those travel as text and are cast back in the final
 * stage, which is exact for them.
 */
export interface ExchangeColumn {
  /** The column's name in the final stage's input. */
  name: string;
  type: string;
  /** Sent as VARCHAR (column `c<i>` of the owner's result) and cast back. */
  asText: boolean;
}

/** The scan stage of one read of a table. */
export interface ScanInput {
  /** The name the final SQL reads this input by. */
  name: string;
  table: TableInfo;
  kind: ScanKind;
  /** What each owner runs over its segments; its columns are `c0`, `c1`, … */
  sql: string;
  /** The table's columns the scan reads. */
  columns: string[];
  exchange: ExchangeColumn[];
  /** For pruning segments by the manifest's min/max. */
  window: TimeWindow;
}

export interface ExecutablePlan {
  route: Route;
  /** Why the query is not one aggregate or select over one table. */
  reason?: string;
  tables: TableInfo[];
  inputs: ScanInput[];
  /** What the final stage runs over the inputs. */
  finalSql: string;
  columns: BoundColumn[];
  /**
   * True when the plan depends only on the SQL and the tables' schemas: no function whose value
   * may change between queries (now(), random()...), since the time windows are evaluated here,
   * at plan time. Only such a plan may be reused (plan-cache.ts).
   */
  reusable: boolean;
}

/** The prefix of the final stage's input names; a query that uses it for a name of its own gets another. */
const INPUT_PREFIX = '__in';

/** Names of what reads the clock, whatever DuckDB says of their stability. */
const CLOCK = /^(current_|local|now$|today$|get_current_|transaction_timestamp$|statement_timestamp$)/i;

export class Planner {
  constructor(
    private readonly engine: SqlEngine,
    private readonly lookupTable: (name: string) => Promise<TableInfo | undefined>,
  ) {}

  /** Plans `sql`; `lookupTable` resolves its tables (the planner's own lookup unless given). */
  async plan(sql: string, lookupTable = this.lookupTable): Promise<ExecutablePlan> {
    const node = await this.engine.parse(sql);
    if (!['SELECT_NODE', 'SET_OPERATION_NODE'].includes(node.type))
      throw badRequest('invalid_sql', 'only SELECT queries are supported');
    const refs = referencedRelations(node);
    if (refs.forbidden.length > 0) {
      throw badRequest(
        'forbidden_relation',
        `only Berth's tables can be queried, by name; not allowed: ${refs.forbidden.join(', ')}`,
      );
    }
    const tables: TableInfo[] = [];
    for (const name of refs.tables) {
      const table = TABLE_NAME.test(name.toLowerCase()) ? await lookupTable(name.toLowerCase()) : undefined;
      if (!table) throw badRequest('unknown_table', `unknown table "${name}"`);
      tables.push(table);
    }
    const checked = await this.deparse(node);
    // Names and types are those of the query as sent; what runs must give the same types.
    const columns = await this.bind(sql, tables);
    const runs = await this.bind(checked, tables);
    if (runs.some((c, i) => c.type !== columns[i]?.type)) {
      throw badRequest(
        'unsupported_sql',
        `Berth cannot run this query exactly: written back, its columns would be ${runs.map((c) => c.type).join(', ')} instead of ${columns.map((c) => c.type).join(', ')}`,
      );
    }
    const byName = new Map(tables.map((t) => [t.name, t]));
    const reads = tableReads(node).map((read) => ({ read, table: byName.get(read.table)! }));
    const prefix = inputPrefix(node);
    // The best split first; each next one moves more rows but binds in more cases. The last one
    // (every column, nothing pushed down) is the query itself over the tables' rows.
    for (const level of ['partial', 'rows', 'whole'] as const) {
      const plan = await this.split(node, reads, columns, prefix, level).catch((error: unknown) => {
        if (error instanceof DomainError) throw error;
        return undefined;
      });
      if (plan) return { ...plan, reusable: this.reusable(node) };
    }
    throw badRequest(
      'unsupported_sql',
      'Berth cannot split this query into stages that give the same columns and types',
    );
  }

  /**
   * One split of the query: `partial` lets each read's SELECT run its partial on the owners where
   * it decomposes, `rows` sends filtered named columns for every read, `whole` every column.
   */
  /**
   * Whether the query gives the same answer over the same rows every time: every function it calls
   * is CONSISTENT by DuckDB's stability, none reads the clock (DuckDB calls current_localtimestamp()
   * consistent; parsed as a column, `current_timestamp` and its kind are functions too), and it
   * takes no sample (DuckDB's samples differ from run to run).
   */
  private reusable(node: AstNode): boolean {
    let reusable = true;
    walk(node, (n) => {
      if (n.class === 'FUNCTION') {
        const name = String(n.function_name).toLowerCase();
        if (!this.engine.consistentFunctions.has(name) || CLOCK.test(name)) reusable = false;
      }
      if (n.class === 'COLUMN_REF' && (n.column_names as string[]).some((c) => CLOCK.test(c))) reusable = false;
      if (n.sample !== undefined && n.sample !== null) reusable = false;
    });
    return reusable;
  }

  private async split(
    node: AstNode,
    reads: { read: TableRead; table: TableInfo }[],
    columns: BoundColumn[],
    prefix: string,
    level: 'partial' | 'rows' | 'whole',
  ): Promise<Omit<ExecutablePlan, 'reusable'> | undefined> {
    const replacements = new Map<AstNode, AstNode>();
    const inputs: ScanInput[] = [];
    const reasons: string[] = [];
    for (const [i, { read, table }] of reads.entries()) {
      const name = `${prefix}${i}`;
      const names = table.columns.map((c) => c.name);
      const bounds =
        read.select && !read.ref.sample
          ? timeBounds(read.select.where_clause, table.timestampColumn)
          : { lower: [], upper: [] };
      const window = await this.window(bounds);
      const partial = level === 'partial' ? await this.partial(node, read, table, name, columns) : undefined;
      if (partial && partial.kind !== 'rows') {
        replacements.set(read.select!, partial.final);
        inputs.push({
          name,
          table,
          kind: partial.kind,
          sql: exchangeSql(partial.sql, partial.columns),
          columns: namedColumns(read.select!, read, names),
          exchange: partial.exchange,
          window,
        });
        continue;
      }
      if (partial?.kind === 'rows') reasons.push(partial.reason);
      const read_ = level === 'whole' ? names : namedColumns(node, read, names);
      const conjuncts = level === 'whole' ? [] : pushableConjuncts(read, names, this.engine.aggregateFunctions);
      const rowsSql = await this.engine.deparse(rowsSelect(read, read_, conjuncts));
      const sent = await this.engine.describe(rowsSql, [table]);
      replacements.set(read.ref, inputTable(read, name));
      inputs.push({
        name,
        table,
        kind: 'rows',
        sql: exchangeSql(rowsSql, sent),
        columns: read_,
        exchange: exchangeColumns(sent, (c) => c.name),
        window,
      });
    }
    const finalSql = await this.engine.deparse(replaceNodes(node, replacements) as AstNode);
    const finalColumns = await this.engine.describe(
      finalSql,
      inputs.map((input) => ({ name: input.name, columns: input.exchange })),
    );
    if (
      finalColumns.length !== columns.length ||
      finalColumns.some((c, i) => c.type !== columns[i]!.type || c.name !== columns[i]!.name)
    )
      return undefined;
    const single = inputs.length === 1 && reads[0]!.read.select === node ? inputs[0]!.kind : undefined;
    const route: Route = single === 'aggregate' || single === 'select' ? single : 'stages';
    const reason =
      route === 'stages'
        ? (reasons[0] ??
          (inputs.length === 0
            ? 'no table'
            : inputs.length > 1
              ? 'more than one table read'
              : 'a subquery over the table'))
        : undefined;
    return {
      route,
      ...(reason ? { reason } : {}),
      tables: [...new Set(reads.map((r) => r.table))],
      inputs,
      finalSql,
      columns,
    };
  }

  /** The partial the owners run for the SELECT directly over a read, and what replaces that SELECT in the final stage. */
  private async partial(
    node: AstNode,
    read: TableRead,
    table: TableInfo,
    input: string,
    queryColumns: BoundColumn[],
  ): Promise<
    | { kind: 'aggregate' | 'select'; sql: string; columns: BoundColumn[]; exchange: ExchangeColumn[]; final: AstNode }
    | { kind: 'rows'; reason: string }
    | undefined
  > {
    const select = read.select;
    if (!select) return undefined;
    if (
      !selfContained(
        read,
        table.columns.map((c) => c.name),
      )
    )
      return { kind: 'rows', reason: 'a SELECT that refers outside itself' };
    // The SELECT's own output names: the query's for the query itself, else DuckDB's for the subquery.
    const outputColumns =
      select === node ? queryColumns : await this.engine.describe(await this.engine.deparse(select), [table]);
    const shape = planQuery({
      node: select,
      partialsTable: input,
      tables: new Map([
        [table.name, { timestampColumn: table.timestampColumn, columns: table.columns.map((c) => c.name) }],
      ]),
      aggregateFunctions: this.engine.aggregateFunctions,
      outputColumns: outputColumns.map((c) => c.name),
    });
    if (shape.kind === 'rows') return { kind: 'rows', reason: shape.reason };
    const sql = await this.engine.deparse(shape.partial);
    const columns = await this.engine.describe(sql, [table]);
    // A select's partial has the SELECT's own columns; an aggregate's has the partials' aliases.
    const exchange = exchangeColumns(columns, (c, i) => (shape.kind === 'select' ? outputColumns[i]!.name : c.name));
    return { kind: shape.kind, sql, columns, exchange, final: shape.final };
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

/** Types the exchange does not carry as they are (services/common/arrow-exchange.ts): they travel as text. */
const TRAVELS_AS_TEXT = /\b(ENUM|UNION)\(|\b(GEOMETRY|VARIANT)\b|"NULL"/;

const exchangeColumns = (columns: BoundColumn[], name: (c: BoundColumn, i: number) => string): ExchangeColumn[] =>
  columns.map((c, i) => ({ name: name(c, i), type: c.type, asText: TRAVELS_AS_TEXT.test(c.type) }));

/** What an owner runs: the scan SQL, its columns renamed c0, c1, ... and the ones the exchange does not carry sent as text. */
function exchangeSql(sql: string, columns: BoundColumn[]): string {
  const names = columns.map((_, i) => `c${i}`);
  const select = columns.map((c, i) => (TRAVELS_AS_TEXT.test(c.type) ? `CAST(c${i} AS VARCHAR) AS c${i}` : `c${i}`));
  return `SELECT ${select.join(', ')} FROM (${sql}) AS __exchange(${names.join(', ')})`;
}

/** A prefix for the final stage's input names that no name in the query starts with. */
function inputPrefix(node: AstNode): string {
  const names = new Set<string>();
  walk(node, (n) => {
    for (const key of ['alias', 'table_name', 'key', 'cte_name'])
      if (typeof n[key] === 'string') names.add(n[key].toLowerCase());
    for (const cte of (n.cte_map?.map ?? []) as { key: string }[]) names.add(String(cte.key).toLowerCase());
  });
  let prefix = INPUT_PREFIX;
  while ([...names].some((n) => n.startsWith(prefix))) prefix = `_${prefix}`;
  return prefix;
}

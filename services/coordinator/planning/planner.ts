/**
 * Turns SQL into an executable plan in two stages: for every read of a catalog table, the SQL its
 * segments' owners run (a partial aggregate, a distinct or top-k select, or the columns the query
 * names filtered by the conjuncts that only need the row: core/query-plan/), and the SQL the final
 * stage runs over what they send. It checks the SQL (syntax, relations, binding) with DuckDB
 * (sql-binder.ts), and keeps a decomposition only when the final stage gives exactly the columns
 * and types the query itself would: correctness first, then the less the owners send the better.
 *
 * What runs is always SQL written back from the tree that was checked, never the text as sent: a
 * trailing comment or semicolon cannot change it, and no relation can appear that the check did
 * not see.
 */
import { joinedTables, matchesByName, partitionableTables } from '../../../core/query-plan/broadcast.js';
import { planQuery } from '../../../core/query-plan/decompose.js';
import { referencedRelations, tableReads, type TableRead } from '../../../core/query-plan/names.js';
import {
  commonTableExpressions,
  isColumnRef,
  isFunction,
  isSelectNode,
  replaceNodes,
  walk,
  type AstNode,
  type QueryNode,
  type SelectNode,
} from '../../../core/query-plan/parse-tree.js';
import {
  inputTable,
  namedColumns,
  pushableConjuncts,
  rowsSelect,
  selfContained,
} from '../../../core/query-plan/pushdown.js';
import { timeBounds, type TimeBounds } from '../../../core/query-plan/time-window.js';
import { quoteIdent, TABLE_NAME } from '../../../core/identifiers.js';
import { badRequest, DomainError } from '../../common/errors.js';
import type { TableInfo } from '../../meta/client.js';
import { liftLiterals, type Literal } from '../../../core/query-plan/literals.js';
import type {
  BoundColumn,
  BroadcastPlan,
  ExchangeColumn,
  ExchangeInput,
  ExecutablePlan,
  ScanInput,
  TimeWindow,
} from '../stages.js';
import type { SqlBinder, TemplateCheck } from './sql-binder.js';

/** A plan whose SQL does not bind the same with its literals as parameters: planned again with them in. */
export class TemplateMismatch extends Error {
  constructor() {
    super('the plan does not bind the same with its literals as parameters');
  }
}

interface WindowedRead {
  read: TableRead;
  table: TableInfo;
  window: TimeWindow;
  moving?: { sql: string; lower: number };
}

/** The prefix of the final stage's input names; a query that uses it for a name of its own gets another. */
const INPUT_PREFIX = '__in';

/**
 * How much of a read the planner moves to its owners, most first: `partials` (the SELECT over
 * the read, where it decomposes: split `aggregate` or `select`), `filters` (the columns the query
 * names, filtered by the conjuncts that need only the row: split `rows`) or `nothing` (every
 * column, unfiltered: split `rows`, the query itself over the table's rows).
 */
type Pushdown = 'partials' | 'filters' | 'nothing';

/** Names of what reads the clock, whatever DuckDB says of their stability. */
const CLOCK = /^(current_|local|now$|today$|get_current_|transaction_timestamp$|statement_timestamp$)/i;

export class Planner {
  constructor(
    private readonly binder: SqlBinder,
    private readonly lookupTable: (name: string) => Promise<TableInfo | undefined>,
  ) {}

  /**
   * Plans `sql`; `lookupTable` resolves its tables (the planner's own lookup unless given). What
   * the plan runs takes the query's lifted literals (core/query-plan/literals.ts) as parameters:
   * `parsed` is the statement as DuckDB reads it (SqlBinder.statement) and its tree with them
   * marked, when the caller has it.
   */
  async plan(
    text: string,
    lookupTable = this.lookupTable,
    parsed?: { sql: string; node: QueryNode; literals: Literal[] },
  ): Promise<ExecutablePlan> {
    const { sql, node } = parsed ?? (await this.binder.statement(text));
    const literals = parsed?.literals ?? liftLiterals(node);
    if (!['SELECT_NODE', 'SET_OPERATION_NODE'].includes(node.type))
      throw badRequest('invalid_sql', 'only SELECT queries are supported');
    // The plan's own parameters are the lifted literals ($p1, …): a query's must be bound before it comes.
    if (hasParameter(node))
      throw badRequest(
        'invalid_sql',
        'the query has a parameter ($n or ?): write its value in the SQL, or bind it through the PostgreSQL protocol',
      );
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
    // Names and types are those of the query as sent; what runs must give the same types. The two
    // round trips overlap; where both fail, the bind's error is told, as DuckDB would tell it.
    const [bound, written] = await Promise.allSettled([this.bind(sql, tables), this.deparse(node)]);
    const columns = settled(bound);
    const { sql: checked, template: checkedTemplate } = settled(written);
    const byName = new Map(tables.map((t) => [t.name, t]));
    // Each read's time window, the same whatever is pushed down: found while what runs binds.
    const [ran, windowed] = await Promise.allSettled([
      this.bind(checked, tables),
      Promise.all(tableReads(node).map((read) => this.readWindow(read, byName.get(read.table)!))),
    ]);
    const runs = settled(ran);
    const reads = settled(windowed);
    if (runs.some((c, i) => c.type !== columns[i]?.type)) {
      throw badRequest(
        'unsupported_sql',
        `Berth cannot run this query exactly: written back, its columns would be ${runs.map((c) => c.type).join(', ')} instead of ${columns.map((c) => c.type).join(', ')}`,
      );
    }
    const prefix = inputPrefix(node);
    // The most pushed down first; each next one moves more rows but binds in more cases.
    for (const pushdown of ['partials', 'filters', 'nothing'] as const) {
      const plan = await this.split(node, reads, columns, prefix, pushdown).catch((error: unknown) => {
        if (error instanceof DomainError) throw error;
        return undefined;
      });
      if (plan) {
        const { templates, ...split } = plan;
        const broadcast = await this.broadcasts(node, reads, columns, prefix).catch((error: unknown) => {
          if (error instanceof DomainError) throw error;
          return undefined;
        });
        // What runs takes parameters where the checks bound literals: it must bind to the same columns.
        // The query's own too: a subquery's literal in the select list names its column.
        const query = { sql: checked, template: checkedTemplate, tables };
        if (!(await this.binder.sameColumns([query, ...templates, ...(broadcast?.templates ?? [])])))
          throw new TemplateMismatch();
        return {
          ...split,
          ...(broadcast ? { broadcastPlans: broadcast.plans } : {}),
          parameters: literals,
          reusable: this.reusable(node),
        };
      }
    }
    throw badRequest(
      'unsupported_sql',
      'Berth cannot split this query into stages that give the same columns and types',
    );
  }

  /**
   * Whether the query gives the same answer over the same rows every time: every function it calls
   * is CONSISTENT by DuckDB's stability, none reads the clock (DuckDB calls current_localtimestamp()
   * consistent; parsed as a column, `current_timestamp` and its kind are functions too), and it
   * takes no sample (DuckDB's samples differ from run to run).
   */
  private reusable(node: QueryNode): boolean {
    let reusable = true;
    walk(node, (n) => {
      if (isFunction(n)) {
        const name = String(n.function_name).toLowerCase();
        if (!this.binder.consistentFunctions.has(name) || CLOCK.test(name)) reusable = false;
      }
      if (isColumnRef(n) && n.column_names.some((c) => CLOCK.test(c))) reusable = false;
      if (n.sample !== undefined && n.sample !== null) reusable = false;
    });
    return reusable;
  }

  /** The query split with this much pushed down to each read's owners, if it binds to the query's columns. */
  private async split(
    node: QueryNode,
    reads: WindowedRead[],
    columns: BoundColumn[],
    prefix: string,
    pushdown: Pushdown,
  ): Promise<(Omit<ExecutablePlan, 'reusable' | 'parameters'> & { templates: TemplateCheck[] }) | undefined> {
    const replacements = new Map<AstNode, AstNode>();
    const templates: TemplateCheck[] = [];
    const inputs: ScanInput[] = [];
    const reasons: string[] = [];
    for (const [i, { read, table, window, moving }] of reads.entries()) {
      const name = `${prefix}${i}`;
      const names = table.columns.map((c) => c.name);
      const partial = pushdown === 'partials' ? await this.partial(node, read, table, name, columns) : undefined;
      if (partial && partial.split !== 'rows') {
        templates.push({ sql: partial.sql, template: partial.template, tables: [table] });
        replacements.set(read.select!, partial.final);
        inputs.push({
          name,
          table,
          split: partial.split,
          sql: exchangeSql(partial.template, partial.columns),
          columns: namedColumns(read.select!, read, names),
          exchange: partial.exchange,
          window,
          ...(moving ? { bounds: moving } : {}),
        });
        continue;
      }
      if (partial?.split === 'rows') reasons.push(partial.reason);
      const read_ = pushdown === 'nothing' ? names : namedColumns(node, read, names);
      const conjuncts = pushdown === 'nothing' ? [] : pushableConjuncts(read, names, this.binder.aggregateFunctions);
      const rowsSql = await this.binder.deparseBoth(rowsSelect(read, read_, conjuncts));
      const sent = await this.binder.describe(rowsSql.sql, [table]);
      templates.push({ ...rowsSql, tables: [table] });
      replacements.set(read.ref, inputTable(read, name));
      inputs.push({
        name,
        table,
        split: 'rows',
        sql: exchangeSql(rowsSql.template, sent),
        columns: read_,
        exchange: exchangeColumns(sent, (c) => c.name),
        window,
        ...(moving ? { bounds: moving } : {}),
      });
    }
    const exchanged = inputs.map((input) => ({ name: input.name, columns: input.exchange }));
    const final = await this.finalStage(replaceNodes(node, replacements) as AstNode, exchanged, columns);
    if (!final) return undefined;
    // The final stage only finishes partials when the query is the SELECT over its one read.
    const route = inputs.length === 1 && reads[0]!.read.select === node ? inputs[0]!.split : 'rows';
    const reason =
      route === 'rows'
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
      finalSql: final.template,
      columns,
      templates: [...templates, { ...final, tables: exchanged }],
    };
  }

  /**
   * The final stage's SQL for `tree` over what the owners send, if it gives exactly the query's
   * columns and types, named as the query names them.
   */
  private async finalStage(
    tree: AstNode,
    exchanged: ExchangeInput[],
    columns: BoundColumn[],
  ): Promise<{ sql: string; template: string } | undefined> {
    let { sql, template } = await this.binder.deparseBoth(tree);
    let finalColumns = await this.binder.describe(sql, exchanged);
    if (finalColumns.length !== columns.length || finalColumns.some((c, i) => c.type !== columns[i]!.type))
      return undefined;
    if (finalColumns.some((c, i) => c.name !== columns[i]!.name)) {
      // An unnamed expression is named by its text, which writing it back can change (2e1 is
      // written 20.0, #5 a column's name): the query's own names go back on from outside, since
      // an alias inside would change what ORDER BY and GROUP BY names mean. As a select list, not
      // a column list: a query may give two columns one name, which a column list would rename.
      const inner = columns.map((_, i) => `__c${i}`);
      const named = columns.map((c, i) => `__named.${inner[i]} AS ${quoteIdent(c.name)}`);
      const rename = (sql: string) => `SELECT ${named.join(', ')} FROM (${sql}) AS __named(${inner.join(', ')})`;
      [sql, template] = [rename(sql), rename(template)];
      finalColumns = await this.binder.describe(sql, exchanged);
      if (finalColumns.some((c, i) => c.name !== columns[i]!.name || c.type !== columns[i]!.type)) return undefined;
    }
    return { sql, template };
  }

  /**
   * Where the SELECT joins tables (core/query-plan/broadcast.ts), the query run on the owners of
   * each table that may be partitioned, every other table read whole beside it: the SELECT over
   * the join split as the SELECT over one read is, one plan per such table (the same SQL; which
   * one runs, execution decides by the tables' sizes). None when the SELECT does not decompose.
   */
  private async broadcasts(
    node: QueryNode,
    reads: WindowedRead[],
    columns: BoundColumn[],
    prefix: string,
  ): Promise<{ plans: BroadcastPlan[]; templates: TemplateCheck[] } | undefined> {
    if (!isSelectNode(node)) return undefined;
    const partitionable = partitionableTables(node);
    const joined = joinedTables(node.from_table);
    // Every read of a table must be one of the join's: a table read elsewhere too would be read twice.
    if (partitionable.length === 0 || reads.length !== joined.length) return undefined;
    if (reads.some(({ read }) => !joined.includes(read.ref))) return undefined;
    const tables = reads.map(({ table }) => table);
    const names = (table: TableInfo) => table.columns.map((c) => c.name);
    const name = `${prefix}0`;
    const shape = planQuery({
      node,
      partialsTable: name,
      tables: new Map(tables.map((t) => [t.name, { timestampColumn: t.timestampColumn, columns: names(t) }])),
      aggregateFunctions: this.binder.aggregateFunctions,
      outputColumns: columns.map((c) => c.name),
      broadcastJoin: true,
    });
    if (shape.split === 'rows') return undefined;
    const partial = await this.binder.deparseBoth(shape.partial);
    const sent = await this.binder.describe(partial.sql, tables);
    if (sent.some((c) => CARRIED_ONLY_AS_TEXT.test(c.type))) return undefined;
    const exchange = exchangeColumns(sent, (c, i) =>
      shape.split === 'select' ? (columns[i]?.name ?? c.name) : c.name,
    );
    const exchanged = [{ name, columns: exchange }];
    const final = await this.finalStage(shape.final, exchanged, columns);
    if (!final) return undefined;
    const plans = await Promise.all(
      partitionable.map(async (ref): Promise<BroadcastPlan> => {
        const big = reads.find(({ read }) => read.ref === ref)!;
        // A bare timestamp name a USING or NATURAL join matches may be either side's: then nothing prunes.
        const ts = big.table.timestampColumn;
        const { window, moving } =
          ts && !matchesByName(node, ts) ? await this.readWindow({ ...big.read, select: node }, big.table) : big;
        return {
          route: shape.split,
          finalSql: final.template,
          input: {
            name,
            table: big.table,
            split: shape.split,
            sql: exchangeSql(partial.template, sent),
            columns: namedColumns(node, big.read, names(big.table)),
            exchange,
            window,
            ...(moving ? { bounds: moving } : {}),
            whole: reads
              .filter((r) => r !== big)
              .map(({ read, table }) => ({ table, columns: namedColumns(node, read, names(table)) })),
          },
        };
      }),
    );
    return {
      plans,
      templates: [
        { ...partial, tables },
        { ...final, tables: exchanged },
      ],
    };
  }

  /**
   * A read with the time window its SELECT's WHERE bounds (pruning), and the bounds as a template
   * when they hold lifted literals (a cached plan's values prune anew). Bounds the planner cannot
   * evaluate prune nothing.
   */
  private async readWindow(read: TableRead, table: TableInfo): Promise<WindowedRead> {
    return await this.boundedRead(read, table).catch(() => ({ read, table, window: {} }));
  }

  private async boundedRead(read: TableRead, table: TableInfo): Promise<WindowedRead> {
    const bounds =
      read.select && !read.ref.sample
        ? timeBounds(read.select.where_clause, read, {
            timestampColumn: table.timestampColumn,
            columns: table.columns.map((c) => c.name),
          })
        : { lower: [], upper: [] };
    const windowSql = await this.binder.boundsSql(bounds);
    if (!windowSql) return { read, table, window: {} };
    const window = await this.binder.window(windowSql.sql, windowSql.lower);
    return windowSql.template !== windowSql.sql
      ? { read, table, window, moving: { sql: windowSql.template, lower: windowSql.lower } }
      : { read, table, window };
  }

  /** The partial the owners run for the SELECT directly over a read, and what replaces that SELECT in the final stage. */
  private async partial(
    node: QueryNode,
    read: TableRead,
    table: TableInfo,
    input: string,
    queryColumns: BoundColumn[],
  ): Promise<
    | {
        split: 'aggregate' | 'select';
        sql: string;
        /** The same with the lifted literals as parameters. */
        template: string;
        columns: BoundColumn[];
        exchange: ExchangeColumn[];
        final: SelectNode;
      }
    | { split: 'rows'; reason: string }
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
      return { split: 'rows', reason: 'a SELECT that refers outside itself' };
    // The SELECT's own output names: the query's for the query itself, else DuckDB's for the subquery.
    const outputColumns =
      select === node ? queryColumns : await this.binder.describe(await this.binder.deparse(select), [table]);
    const shape = planQuery({
      node: select,
      partialsTable: input,
      tables: new Map([
        [table.name, { timestampColumn: table.timestampColumn, columns: table.columns.map((c) => c.name) }],
      ]),
      aggregateFunctions: this.binder.aggregateFunctions,
      outputColumns: outputColumns.map((c) => c.name),
    });
    if (shape.split === 'rows') return { split: 'rows', reason: shape.reason };
    const { sql, template } = await this.binder.deparseBoth(shape.partial);
    const columns = await this.binder.describe(sql, [table]);
    // Only the final stage can make a UNION value: as text it would come back with another tag, or not at all.
    if (columns.some((c) => CARRIED_ONLY_AS_TEXT.test(c.type)))
      return { split: 'rows', reason: 'a UNION value, which the exchange cannot carry' };
    // A select's partial has the SELECT's own columns (and sort keys it does not output, by their aliases); an aggregate's has the partials' aliases.
    const exchange = exchangeColumns(columns, (c, i) =>
      shape.split === 'select' ? (outputColumns[i]?.name ?? c.name) : c.name,
    );
    return { split: shape.split, sql, template, columns, exchange, final: shape.final };
  }

  /** The checked tree as SQL, and with its lifted literals as parameters; a tree DuckDB cannot write back is a query Berth cannot run. */
  private async deparse(node: QueryNode): Promise<{ sql: string; template: string }> {
    try {
      return await this.binder.deparseBoth(node);
    } catch (error) {
      throw badRequest('unsupported_sql', `Berth cannot run this query: ${(error as Error).message.split('\n')[0]}`);
    }
  }

  /** Binds the query against the tables' schemas; DuckDB's error becomes a 400. */
  private async bind(sql: string, tables: TableInfo[]): Promise<BoundColumn[]> {
    try {
      return await this.binder.describe(sql, tables);
    } catch (error) {
      throw badRequest('invalid_sql', (error as Error).message);
    }
  }
}

const settled = <T>(result: PromiseSettledResult<T>): T => {
  if (result.status === 'rejected') throw result.reason;
  return result.value;
};

/** The window the bounds describe; a bound DuckDB cannot read as a timestamp prunes nothing. */
export async function timeWindow(binder: SqlBinder, bounds: TimeBounds): Promise<TimeWindow> {
  const query = await binder.boundsSql(bounds);
  return query ? await binder.window(query.sql, query.lower) : {};
}

/** Types the exchange does not carry as they are (services/common/arrow-exchange.ts): they travel as text. */
const TRAVELS_AS_TEXT = /\b(ENUM|UNION)\(|\b(GEOMETRY|VARIANT)\b|"NULL"/;
/** Of those, the ones text cannot bring back: VARCHAR casts to a UNION only by picking a member by its type. */
const CARRIED_ONLY_AS_TEXT = /\bUNION\(/;

const exchangeColumns = (columns: BoundColumn[], name: (c: BoundColumn, i: number) => string): ExchangeColumn[] =>
  columns.map((c, i) => ({ name: name(c, i), type: c.type, asText: TRAVELS_AS_TEXT.test(c.type) }));

/** What an owner runs: the scan SQL, its columns renamed c0, c1, ... and the ones the exchange does not carry sent as text. */
function exchangeSql(sql: string, columns: BoundColumn[]): string {
  const names = columns.map((_, i) => `c${i}`);
  const select = columns.map((c, i) => (TRAVELS_AS_TEXT.test(c.type) ? `CAST(c${i} AS VARCHAR) AS c${i}` : `c${i}`));
  return `SELECT ${select.join(', ')} FROM (${sql}) AS __exchange(${names.join(', ')})`;
}

/** Whether the query has a parameter of its own. */
function hasParameter(node: QueryNode): boolean {
  let found = false;
  walk(node, (n) => {
    if (n.class === 'PARAMETER') found = true;
  });
  return found;
}

/** A prefix for the final stage's input names that no name in the query starts with. */
function inputPrefix(node: QueryNode): string {
  const names = new Set<string>();
  walk(node, (n) => {
    for (const key of ['alias', 'table_name', 'key', 'cte_name'])
      if (typeof n[key] === 'string') names.add(n[key].toLowerCase());
    for (const cte of commonTableExpressions(n)) names.add(String(cte.key).toLowerCase());
  });
  let prefix = INPUT_PREFIX;
  while ([...names].some((n) => n.startsWith(prefix))) prefix = `_${prefix}`;
  return prefix;
}

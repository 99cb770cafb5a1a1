/**
 * Splits the SELECT directly over one read of a catalog table in two stages, as MPP engines do: a
 * scan stage on each segment's owner and a final stage over the union of what the owners send.
 *
 * Every time a query reads a catalog table, that read becomes one input of the final stage, and
 * the SELECT directly over it decides what the owners do:
 *
 * - `aggregate`: aggregates that decompose. Each owner runs a partial GROUP BY; the final stage
 *   finishes it (counts and sums are summed, min of mins, avg as sum over count) and applies
 *   HAVING, ORDER BY and LIMIT. A FILTER stays with its partial. A DISTINCT aggregate (or one that
 *   duplicates cannot change: approx_count_distinct, bool_and, ...) adds its arguments to the
 *   partial's keys, so that owners send each distinct value once per group.
 * - `select`: a select without aggregates. Each owner runs it (DISTINCT, and ORDER BY with LIMIT
 *   raised by OFFSET: top-k, with the sort keys it does not output beside); the final stage orders,
 *   offsets and limits the union.
 * - `rows`: anything else (windows, exact quantiles, joins, correlated subqueries). Owners send the
 *   columns the query names, filtered by the conjuncts of the WHERE that only need the row
 *   (pushdown.ts).
 */
import {
  baseTable,
  call,
  castTo,
  clone,
  coalesce,
  columnRef,
  integer,
  isBaseTable,
  isColumnRef,
  isConstant,
  isConstantLike,
  isDistinctModifier,
  isFunction,
  isJoin,
  isLimitModifier,
  isOrderModifier,
  isPositional,
  isSelectNode,
  isStar,
  isSubquery,
  sameExpression,
  selectNode,
  integerConstant,
  some,
  withAlias,
  type AstNode,
  type ComparisonNode,
  type Expression,
  type FunctionNode,
  type OrderByNode,
  type QueryNode,
  type ResultModifier,
  type SelectNode,
} from './parse-tree.js';
import {
  isPlainStar,
  referencedRelations,
  resolveColumn,
  visibleColumns,
  type TableColumns,
  type TableRead,
} from './names.js';
import { timeBounds, type TimeBounds } from './time-window.js';
import { visibleTables } from './broadcast.js';

/** The name of the table that holds the partial results at the coordinator. */
export const PARTIALS_TABLE = '__partials';
/** The prefix of the names a select's owners send its sort keys under, when the query does not output them. */
const HIDDEN_KEY = '__key';

export interface PlanInput {
  /** A SELECT_NODE (or set operation): the query's statement, or a SELECT inside it. */
  node: QueryNode;
  /** The name the final stage reads the owners' results by. @default PARTIALS_TABLE */
  partialsTable?: string;
  /** Every table the query may name, with its timestamp column and column names. */
  tables: ReadonlyMap<string, TableColumns>;
  /** Names of DuckDB's aggregate functions (from duckdb_functions()). */
  aggregateFunctions: ReadonlySet<string>;
  /** The query's output column names, as DuckDB binds them. */
  outputColumns: readonly string[];
  /**
   * The SELECT reads a join, every table of which but one each owner reads whole (broadcast.ts):
   * it splits as the SELECT over one read does.
   */
  broadcastJoin?: boolean;
}

/** How a read is split between its segments' owners and the final stage: this module's header. */
export const SPLITS = ['aggregate', 'select', 'rows'] as const;
export type Split = (typeof SPLITS)[number];

export type QueryPlan =
  | { split: 'aggregate'; partial: SelectNode; final: SelectNode }
  | { split: 'select'; partial: SelectNode; final: SelectNode }
  | { split: 'rows'; tables: string[]; bounds: Map<string, TimeBounds>; reason: string };

const DECOMPOSABLE = new Set(['count_star', 'count', 'sum', 'min', 'max', 'avg']);
/** Aggregates that duplicates of a value cannot change: owners may send each value once per group. */
const DUPLICATE_INSENSITIVE = new Set([
  'approx_count_distinct',
  'bool_and',
  'bool_or',
  'bit_and',
  'bit_or',
  'min',
  'max',
]);

export function planQuery(input: PlanInput): QueryPlan {
  const { node } = input;
  const { tables, occurrences } = referencedRelations(node);
  const rowsPlan = (reason: string): QueryPlan => {
    const bounds = new Map<string, TimeBounds>();
    // Pruning by the top-level WHERE is only sound when it is the table's one appearance.
    if (
      isSelectNode(node) &&
      isBaseTable(node.from_table) &&
      node.from_table.table_name === tables[0] &&
      (node.cte_map?.map ?? []).length === 0 &&
      occurrences === 1
    ) {
      const info = input.tables.get(tables[0]!);
      const read: TableRead = { ref: node.from_table, table: tables[0]!, select: node };
      if (info) bounds.set(tables[0]!, timeBounds(node.where_clause, read, info));
    }
    return { split: 'rows', tables, bounds, reason };
  };

  if (!isSelectNode(node)) return rowsPlan('set operation');
  const join = input.broadcastJoin === true && isJoin(node.from_table);
  if (!join && (!isBaseTable(node.from_table) || occurrences !== 1))
    return rowsPlan('more than one table or a subquery in FROM');
  if ((node.cte_map?.map ?? []).length > 0) return rowsPlan('common table expressions');
  if (some(node, isSubquery)) return rowsPlan('subquery');
  if (some(node, (n) => n.class === 'WINDOW')) return rowsPlan('window function');
  if (node.qualify || node.sample || node.from_table.sample) return rowsPlan('QUALIFY or SAMPLE');
  const distinct = node.modifiers.find(isDistinctModifier);
  if (distinct && (distinct.distinct_on_targets ?? []).length > 0) return rowsPlan('DISTINCT ON');
  if (node.group_sets.length > 1) return rowsPlan('grouping sets');
  // `#n` names a column by its place in the FROM clause: only the query's own SQL over every column keeps it.
  if (some(node, isPositional)) return rowsPlan('positional reference');

  // The names the FROM's columns go by: a GROUP BY name that is one of them is the column, not a select alias.
  const knownColumns = new Set<string>();
  let read: TableRead | undefined;
  for (const ref of visibleTables(node.from_table)) {
    const info = input.tables.get(ref.table_name.toLowerCase());
    if (!info) return rowsPlan('unknown table');
    for (const c of visibleColumns(ref, info.columns)) knownColumns.add(c.toLowerCase());
    if (!join) read = { ref, table: ref.table_name.toLowerCase(), select: node };
  }
  const isAggregate = (n: unknown): n is FunctionNode =>
    isFunction(n) && input.aggregateFunctions.has(String(n.function_name).toLowerCase());
  const hasAggregates = some([node.select_list, node.having, node.modifiers], isAggregate);
  if (node.aggregate_handling === 'FORCE_AGGREGATES' && node.group_expressions.length === 0) {
    // GROUP BY ALL: the select items without an aggregate are the keys, except those that read
    // no column (a constant, current_date), which DuckDB leaves out: with no key left the query
    // is one group, one row even over no rows.
    const readsColumns = (n: AstNode) => isColumnRef(n) || isPositional(n) || isStar(n) || isSubquery(n);
    const keys = node.select_list
      .filter((item) => !some(item, isAggregate) && some(item, readsColumns))
      .map((item) => ({ ...clone(item), alias: '' }));
    return planQuery({
      ...input,
      node: {
        ...node,
        aggregate_handling: 'STANDARD_HANDLING',
        group_expressions: keys,
        group_sets: keys.length > 0 ? [keys.map((_, i) => i)] : [],
      },
    });
  }
  if (node.aggregate_handling !== 'STANDARD_HANDLING') return rowsPlan('forced aggregation');
  const hasGroups = node.group_expressions.length > 0;

  if (hasAggregates || hasGroups || node.having) {
    if (distinct) return rowsPlan('SELECT DISTINCT over aggregates');
    return planAggregate(input, node, knownColumns, isAggregate) ?? rowsPlan('aggregate that does not decompose');
  }
  return (
    planSelect(input, node, read && { read, columns: input.tables.get(read.table)!.columns }) ??
    rowsPlan('ORDER BY or LIMIT that the coordinator cannot finish')
  );
}

function planAggregate(
  input: PlanInput,
  node: SelectNode,
  knownColumns: ReadonlySet<string>,
  isAggregate: (n: unknown) => n is FunctionNode,
): QueryPlan | undefined {
  const partialsTable = input.partialsTable ?? PARTIALS_TABLE;
  // Collect the distinct aggregate calls; each must decompose (or be keyed) and hold no aggregate inside.
  const calls: FunctionNode[] = [];
  /** Expressions the partial also groups by: arguments and filters of keyed aggregates. */
  const keys: Expression[] = [];
  const keyOf = (expr: Expression): number => {
    let k = keys.findIndex((e) => sameExpression(e, expr));
    if (k < 0) k = keys.push(expr) - 1;
    return k;
  };
  const keyed = new Set<FunctionNode>();
  let decomposable = true;
  const collect = (tree: unknown) =>
    walkAggregates(tree, isAggregate, (call) => {
      const name = String(call.function_name).toLowerCase();
      const args = call.children;
      const orders = call.order_bys?.orders ?? [];
      if (call.export_state || some(args, isAggregate) || some(call.filter, isAggregate) || some(orders, isAggregate))
        decomposable = false;
      else if (
        DECOMPOSABLE.has(name) &&
        !call.distinct &&
        orders.length === 0 &&
        args.length <= 1 &&
        (name === 'count_star') === (args.length === 0)
      ) {
        // decomposes as a partial (with its FILTER) and a final
      } else if (
        (call.distinct || DUPLICATE_INSENSITIVE.has(name)) &&
        orders.every((o) => isConstantLike(o.expression) || args.some((a) => sameExpression(a, o.expression)))
      ) {
        keyed.add(call);
      } else decomposable = false;
      if (!calls.some((c) => sameExpression(c, call))) calls.push(call);
    });
  collect([node.select_list, node.having, node.modifiers]);
  if (!decomposable) return undefined;
  // A `*` or COLUMNS() outside every aggregate would expand, in the final stage, over the
  // partial's columns (COLUMNS('1$') matching g1) rather than the query's.
  if (outsideAggregates([node.select_list, node.having, node.modifiers], isAggregate).some(isStar)) return undefined;

  // GROUP BY 1 and GROUP BY alias name a select item; resolve them to the expressions they name.
  // A name the FROM's columns go by (after an alias list) is a column, as DuckDB binds it.
  const groups = node.group_expressions.map((g): Expression | undefined => {
    const position = integerConstant(g);
    if (position !== undefined) return node.select_list[position - 1];
    if (isColumnRef(g) && g.column_names.length === 1 && !knownColumns.has(String(g.column_names[0]).toLowerCase())) {
      return (
        node.select_list.find((s) => String(s.alias).toLowerCase() === String(g.column_names[0]).toLowerCase()) ?? g
      );
    }
    return g;
  });
  if (groups.some((g) => g === undefined || some(g, isAggregate))) return undefined;

  // The partial's columns are g0…, k0…, a0…, prefixed so that no name the final stage may see is
  // one of them: a bare `g0` left in the final stage (a column the FROM names so) would bind to a
  // partial's column instead.
  const names = new Set([
    ...knownColumns,
    ...node.select_list.map((s) => String(s.alias ?? '').toLowerCase()),
    // An output's name, however it got it (`s.g0` is named g0): ORDER BY binds a bare name to it first.
    ...input.outputColumns.map((c) => c.toLowerCase()),
  ]);
  let p = '';
  while ([...names].some((n) => new RegExp(`^${p}[gka]\\d`).test(n))) p += '_';
  // Keyed aggregates: their arguments (and filters) become keys k0, k1, ... of the partial.
  const keyRef = (expr: Expression): Expression =>
    isConstantLike(expr) ? clone(expr) : columnRef(`${p}k${keyOf(expr)}`);
  const keyedFinal = (c: FunctionNode): FunctionNode => ({
    ...clone(c),
    alias: '',
    children: c.children.map(keyRef),
    filter: c.filter ? columnRef(`${p}k${keyOf(c.filter)}`) : null,
    order_bys: {
      ...c.order_bys,
      orders: (c.order_bys?.orders ?? []).map((o) => ({ ...o, expression: keyRef(o.expression) })),
    },
  });

  const partialSelect: Expression[] = groups.map((g, i) => withAlias(clone(g!), `${p}g${i}`));
  const aggregateParts: Expression[] = [];
  const finals: Expression[] = calls.map((c, k): Expression => {
    if ([...keyed].some((kc) => sameExpression(kc, c))) return keyedFinal(c);
    const name = String(c.function_name).toLowerCase();
    const args = clone(c.children);
    const part = (fn: string, suffix = '') => {
      aggregateParts.push({
        ...call(fn, clone(args), `${p}a${k}${suffix}`),
        filter: c.filter ? clone(c.filter) : null,
      });
      return columnRef(`${p}a${k}${suffix}`);
    };
    switch (name) {
      // A sum of counts is a HUGEINT; a count is a BIGINT, and so is the answer.
      case 'count_star':
        return castTo(coalesce([call('sum', [part('count_star')]), integer(0)]), 'BIGINT');
      case 'count':
        return castTo(coalesce([call('sum', [part('count')]), integer(0)]), 'BIGINT');
      case 'sum':
        return call('sum', [part('sum')]);
      case 'min':
        return call('min', [part('min')]);
      case 'max':
        return call('max', [part('max')]);
      default: // avg
        return call('/', [call('sum', [part('sum', 's')]), call('sum', [part('count', 'c')])], '', true);
    }
  });
  partialSelect.push(...keys.map((e, j) => withAlias(clone(e), `${p}k${j}`)), ...aggregateParts);

  const rewrite = (tree: Expression): Expression => {
    const k = calls.findIndex((c) => isAggregate(tree) && sameExpression(c, tree));
    if (k >= 0) return withAlias(clone(finals[k]!), tree.alias ?? '');
    const g = groups.findIndex((group) => sameExpression(group, tree));
    if (g >= 0 && !isConstant(tree)) return columnRef(`${p}g${g}`, tree.alias ?? '');
    return mapChildren(tree, rewrite);
  };

  const partialKeys = [...groups.map((g) => clone(g!)), ...keys.map((e) => clone(e))];
  const groupSets = (n: number) => (n > 0 ? [Array.from({ length: n }, (_, i) => i)] : []);
  const partial: SelectNode = {
    ...clone(node),
    select_list: partialSelect,
    group_expressions: partialKeys,
    group_sets: groupSets(partialKeys.length),
    // Ungrouped, an owner with no row left still sends one partial row, which a keyed aggregate of
    // a constant (count(DISTINCT '')) would count: such an owner sends nothing instead, which
    // every other final (a sum of counts, a min) reads alike.
    having:
      partialKeys.length === 0 && keyed.size > 0
        ? ({
            class: 'COMPARISON',
            type: 'COMPARE_GREATERTHAN',
            alias: '',
            left: call('count_star', []),
            right: integer(0),
          } satisfies ComparisonNode)
        : null,
    modifiers: [],
  };
  const final: SelectNode = {
    ...clone(node),
    select_list: node.select_list.map((item, i) =>
      withAlias(rewrite(item), input.outputColumns[i] ?? item.alias ?? ''),
    ),
    from_table: baseTable(partialsTable),
    where_clause: null,
    group_expressions: groups.map((_, i) => columnRef(`${p}g${i}`)),
    group_sets: groupSets(groups.length),
    having: node.having ? rewrite(node.having) : null,
    modifiers: node.modifiers.map((m): ResultModifier =>
      isOrderModifier(m)
        ? { ...m, orders: m.orders.map((o) => ({ ...o, expression: rewrite(o.expression) })) }
        : clone(m),
    ),
  };
  return { split: 'aggregate', partial, final };
}

/** `from`: the one read the SELECT is directly over and its table's columns; none over a join, which takes no hidden key. */
function planSelect(
  input: PlanInput,
  node: SelectNode,
  from: { read: TableRead; columns: readonly string[] } | undefined,
): QueryPlan | undefined {
  const { outputColumns } = input;
  const distinct = node.modifiers.find(isDistinctModifier);
  if (new Set(outputColumns.map((c) => c.toLowerCase())).size !== outputColumns.length) return undefined;
  // Anything else (LIMIT n%) only the final stage can apply, over every row.
  if (node.modifiers.some((m) => !isDistinctModifier(m) && !isOrderModifier(m) && !isLimitModifier(m)))
    return undefined;
  const order = node.modifiers.find(isOrderModifier);
  const limit = node.modifiers.find(isLimitModifier);
  const constant = (n: Expression | null | undefined): bigint | undefined => {
    if (n == null) return 0n;
    const value: unknown = isConstant(n) ? n.value?.value : undefined;
    return typeof value === 'bigint' || Number.isInteger(value) ? BigInt(value as number | bigint) : undefined;
  };

  // ORDER BY must name output columns, so that the coordinator can order the union. A bare name
  // is a select item's alias first, else a column of the read, as DuckDB binds it: in
  // `SELECT s.ts ... ORDER BY ts` it is the column ts, not the output column named ts.
  const items = node.select_list;
  const outputOf = (e: Expression): string | undefined => {
    const position = integerConstant(e);
    if (position !== undefined) return outputColumns[position - 1];
    if (isColumnRef(e) && e.column_names.length === 1) {
      const bare = String(e.column_names[0]).toLowerCase();
      const aliased = items.flatMap((s, i) => (String(s.alias ?? '').toLowerCase() === bare ? [i] : []));
      if (aliased.length > 0) return aliased.length === 1 ? outputColumns[aliased[0]!] : undefined;
      // Through a plain `*`, the read's column is the output column of its name (output names are unique).
      const resolved = from && resolveColumn(e, from.read, from.columns);
      if (resolved?.fields.length === 0 && items.some((s) => isPlainStar(s, from!.read)))
        return outputColumns.find((c) => c.toLowerCase() === bare);
    }
    const i = items.findIndex((s) => sameExpression(s, e));
    return i >= 0 ? outputColumns[i] : undefined;
  };
  // A key that is a column of the read and no output (ORDER BY ts LIMIT 10 over other columns):
  // the owners send it beside their top-k under a name of its own, and the final stage orders by it.
  // A bare name that is an output's, however the output got it (an alias, or a star's REPLACE,
  // RENAME or COLUMNS), is that output to DuckDB, never the column.
  const outputs = new Set(outputColumns.map((c) => c.toLowerCase()));
  const taken = new Set([...outputs, ...(from?.columns ?? []).map((c) => c.toLowerCase())]);
  const readColumn = (e: Expression): boolean =>
    isColumnRef(e) &&
    (e.column_names.length > 1 || !outputs.has(String(e.column_names[0]).toLowerCase())) &&
    from !== undefined &&
    resolveColumn(e, from.read, from.columns) !== undefined;
  const hidden: Expression[] = [];
  const finalOrders: OrderByNode[] = [];
  for (const o of order?.orders ?? []) {
    let name = outputOf(o.expression);
    if (name === undefined) {
      name = `${HIDDEN_KEY}${hidden.length}`;
      if (distinct || !readColumn(o.expression) || taken.has(name)) return undefined;
      hidden.push(withAlias(clone(o.expression), name));
    }
    finalOrders.push({ ...o, expression: columnRef(name) });
  }

  // Owners each send their distinct rows (or, ordered and limited, their top-k); the final stage does the same over the union.
  const partialModifiers: ResultModifier[] = distinct ? [clone(distinct)] : order ? [clone(order)] : [];
  if (limit && !distinct) {
    const [l, o] = [constant(limit.limit), constant(limit.offset)];
    if (l === undefined || o === undefined || limit.limit == null) return undefined;
    partialModifiers.push({ type: 'LIMIT_MODIFIER', limit: integer(l + o), offset: null });
  }
  const partial: SelectNode = {
    ...clone(node),
    select_list: [...clone(node.select_list), ...hidden],
    modifiers: partialModifiers,
  };
  const star: Expression = {
    class: 'STAR',
    type: 'STAR',
    alias: '',
    relation_name: '',
    exclude_list: [],
    replace_list: [],
    rename_list: [],
    columns: false,
    expr: null,
    unpacked: false,
  };
  const final = selectNode({
    modifiers: [
      ...(distinct ? [clone(distinct)] : []),
      ...(order && finalOrders.length > 0 ? [{ ...order, orders: finalOrders }] : []),
      ...(limit ? [clone(limit)] : []),
    ],
    select_list: hidden.length > 0 ? outputColumns.map((c) => columnRef(c)) : [star],
    from_table: baseTable(input.partialsTable ?? PARTIALS_TABLE),
  });
  return { split: 'select', partial, final };
}

/** Every node of a tree that no aggregate call holds. */
function outsideAggregates(tree: unknown, isAggregate: (n: unknown) => n is FunctionNode): AstNode[] {
  const found: AstNode[] = [];
  const visit = (t: unknown): void => {
    if (Array.isArray(t)) for (const item of t) visit(item);
    else if (t !== null && typeof t === 'object' && !isAggregate(t)) {
      found.push(t as AstNode);
      for (const value of Object.values(t)) visit(value);
    }
  };
  visit(tree);
  return found;
}

/** Visits the outermost aggregate calls in a tree (not aggregates nested inside them). */
function walkAggregates(
  tree: unknown,
  isAggregate: (n: unknown) => n is FunctionNode,
  visit: (call: FunctionNode) => void,
): void {
  if (Array.isArray(tree)) {
    for (const item of tree) walkAggregates(item, isAggregate, visit);
  } else if (tree !== null && typeof tree === 'object') {
    if (isAggregate(tree)) visit(tree);
    else for (const value of Object.values(tree)) walkAggregates(value, isAggregate, visit);
  }
}

/** A copy of an expression (or of any node) with `map` applied to each child expression: the same fields, so the same kind. */
function mapChildren<T extends AstNode>(tree: T, map: (child: Expression) => Expression): T {
  const out: AstNode = {};
  for (const [key, value] of Object.entries(tree)) {
    if (Array.isArray(value)) out[key] = value.map((v) => (isExpression(v) ? map(v) : mapNested(v, map)));
    else if (isExpression(value)) out[key] = map(value);
    else out[key] = mapNested(value, map);
  }
  return out as T;
}

function mapNested(value: unknown, map: (child: Expression) => Expression): unknown {
  if (Array.isArray(value)) return value.map((v) => mapNested(v, map));
  if (value !== null && typeof value === 'object')
    return isExpression(value) ? map(value) : mapChildren(value as AstNode, map);
  return value;
}

/** Any node with a class is an expression (table references and query nodes have none). */
const isExpression = (value: unknown): value is Expression =>
  value !== null && typeof value === 'object' && 'class' in (value as object);

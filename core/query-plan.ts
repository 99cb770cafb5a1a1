/* eslint-disable @typescript-eslint/no-explicit-any -- DuckDB's parse tree is untyped JSON */
/**
 * Reads a query's shape from DuckDB's own parse tree (json_serialize_sql) and splits it in two
 * stages, as MPP engines do: a scan stage on each segment's owner and a final stage over the union
 * of what the scan stage sends. Every time a query reads a catalog table, that read becomes one
 * input of the final stage, and the SELECT directly over it decides what the owners do:
 *
 * - `aggregate`: aggregates that decompose. Each owner runs a partial GROUP BY; the final stage
 *   finishes it (counts and sums are summed, min of mins, avg as sum over count) and applies
 *   HAVING, ORDER BY and LIMIT. A FILTER stays with its partial. A DISTINCT aggregate (or one that
 *   duplicates cannot change: approx_count_distinct, bool_and, ...) adds its arguments to the
 *   partial's keys, so that owners send each distinct value once per group.
 * - `select`: a select without aggregates. Each owner runs it (DISTINCT, and ORDER BY with LIMIT
 *   raised by OFFSET: top-k); the final stage orders, offsets and limits the union.
 * - `rows`: anything else (windows, exact quantiles, joins, correlated subqueries). Owners send the
 *   columns the query names, filtered by the conjuncts of the WHERE that only need the row.
 *
 * Also finds the bounds a WHERE puts on a table's timestamp column, for pruning segments. Pure
 * functions over the tree: parsing, binding and turning trees back into SQL happen in the caller.
 */

export type AstNode = Record<string, any>;

/** The name of the table that holds the partial results at the coordinator. */
export const PARTIALS_TABLE = '__partials';

export interface PlanInput {
  /** A SELECT_NODE (or set operation): the query's statement, or a SELECT inside it. */
  node: AstNode;
  /** The name the final stage reads the owners' results by. @default PARTIALS_TABLE */
  partialsTable?: string;
  /** Every table the query may name, with its timestamp column and column names. */
  tables: ReadonlyMap<string, { timestampColumn: string; columns: readonly string[] }>;
  /** Names of DuckDB's aggregate functions (from duckdb_functions()). */
  aggregateFunctions: ReadonlySet<string>;
  /** The query's output column names, as DuckDB binds them. */
  outputColumns: readonly string[];
}

/** Expressions that bound the timestamp column: ts >= max(lower), ts <= min(upper). */
export interface TimeBounds {
  lower: AstNode[];
  upper: AstNode[];
}

export type QueryPlan =
  | { kind: 'aggregate'; table: string; bounds: TimeBounds; partial: AstNode; final: AstNode }
  | { kind: 'select'; table: string; bounds: TimeBounds; partial: AstNode; final: AstNode }
  | { kind: 'rows'; tables: string[]; bounds: Map<string, TimeBounds>; reason: string };

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

// ── tree walking ─────────────────────────────────────────────────────────────────────────────

/** Calls visit on every object in the tree, parents first. */
export function walk(tree: unknown, visit: (node: AstNode) => void): void {
  if (Array.isArray(tree)) {
    for (const item of tree) walk(item, visit);
  } else if (tree !== null && typeof tree === 'object') {
    visit(tree as AstNode);
    for (const value of Object.values(tree)) walk(value, visit);
  }
}

const some = (tree: unknown, test: (node: AstNode) => boolean): boolean => {
  let found = false;
  walk(tree, (node) => (found ||= test(node)));
  return found;
};

/** What a query reads, resolved the way DuckDB scopes common table expressions. */
export interface Relations {
  /** Unqualified names that are not a CTE in scope: each must be a catalog table. */
  tables: string[];
  /** How many times those names appear. */
  occurrences: number;
  /** Everything else that would read something other than a catalog table: table functions, schema-qualified names, SHOW, settings. */
  forbidden: string[];
}

/** Table references that read something besides the tables a query names (or nothing at all). */
const ALLOWED_REFS = new Set(['BASE_TABLE', 'JOIN', 'SUBQUERY', 'EMPTY', 'EXPRESSION_LIST', 'PIVOT']);
const TABLE_REF_TYPES = new Set([
  ...ALLOWED_REFS,
  'TABLE_FUNCTION',
  'SHOW_REF',
  'COLUMN_DATA',
  'DELIM_GET',
  'CTE',
  'BOUND_TABLE_REF',
]);
/** Scalar functions that read the engine's settings and variables (directories among them), not data. */
const FORBIDDEN_FUNCTIONS = new Set(['current_setting', 'getvariable', 'getenv']);

/**
 * Visits every object in the tree with the CTE names in scope where it stands, the way DuckDB
 * binds them: a CTE's name hides a table in the query that declares it and its subqueries, and in
 * the bodies of the CTEs declared after it (its own body too when it is recursive), never outside.
 */
function walkInScope(node: AstNode, visit: (n: AstNode, ctes: ReadonlySet<string>) => void): void {
  const go = (tree: unknown, scope: ReadonlySet<string>): void => {
    if (Array.isArray(tree)) {
      for (const item of tree) go(item, scope);
      return;
    }
    if (tree === null || typeof tree !== 'object') return;
    const n = tree as AstNode;
    const ctes = (n.cte_map?.map ?? []) as { key: string; value: unknown }[];
    let inner = scope;
    if (ctes.length > 0) {
      const visible = new Set(scope);
      for (const cte of ctes) {
        go(cte.value, visible);
        visible.add(String(cte.key).toLowerCase());
      }
      inner = visible;
    }
    if (n.type === 'RECURSIVE_CTE_NODE') {
      go(n.left, inner);
      go(n.right, new Set([...inner, String(n.cte_name).toLowerCase()]));
      go(n.modifiers, inner);
      return;
    }
    visit(n, inner);
    for (const [key, value] of Object.entries(n)) if (key !== 'cte_map') go(value, inner);
  };
  go(node, new Set());
}

/**
 * The relations a query reads. Anything a CTE's name means outside its scope must be a catalog
 * table, so a CTE named like a file cannot smuggle a file read past the check.
 */
export function referencedRelations(node: AstNode): Relations {
  const tables: string[] = [];
  const forbidden: string[] = [];
  walkInScope(node, (n, ctes) => {
    if (typeof n.type === 'string' && TABLE_REF_TYPES.has(n.type) && !ALLOWED_REFS.has(n.type)) {
      forbidden.push(
        n.type === 'TABLE_FUNCTION' ? `table function ${String(n.function?.function_name ?? '')}` : n.type,
      );
    }
    if (n.class === 'FUNCTION' && FORBIDDEN_FUNCTIONS.has(String(n.function_name).toLowerCase()))
      forbidden.push(`function ${n.function_name}`);
    if (n.type === 'BASE_TABLE' && typeof n.table_name === 'string') {
      const qualified = [n.catalog_name, n.schema_name, n.table_name].filter(
        (part) => typeof part === 'string' && part !== '',
      );
      if (qualified.length > 1) forbidden.push(qualified.join('.'));
      else if (!ctes.has(n.table_name.toLowerCase())) tables.push(n.table_name);
    }
  });
  return { tables: [...new Set(tables)], occurrences: tables.length, forbidden: [...new Set(forbidden)] };
}

/** Structural equality of two expressions, ignoring positions and aliases; identifiers compare case-insensitively. */
export function sameExpression(a: unknown, b: unknown): boolean {
  return JSON.stringify(normalise(a)) === JSON.stringify(normalise(b));
}

function normalise(tree: unknown): unknown {
  if (typeof tree === 'bigint') return `${tree}n`;
  if (Array.isArray(tree)) return tree.map(normalise);
  if (tree === null || typeof tree !== 'object') return tree;
  const out: AstNode = {};
  for (const [key, value] of Object.entries(tree)) {
    if (key === 'query_location' || key === 'alias') continue;
    out[key] =
      key === 'column_names' && Array.isArray(value) ? value.map((s) => String(s).toLowerCase()) : normalise(value);
  }
  return out;
}

const clone = <T>(tree: T): T => structuredClone(tree);

// ── expression builders (the shapes json_serialize_sql produces) ─────────────────────────────

const columnRef = (name: string, alias = ''): AstNode => ({
  class: 'COLUMN_REF',
  type: 'COLUMN_REF',
  alias,
  column_names: [name],
});
const integer = (value: number | bigint): AstNode => ({
  class: 'CONSTANT',
  type: 'VALUE_CONSTANT',
  alias: '',
  value: { type: { id: 'BIGINT', type_info: null }, is_null: false, value },
});
const call = (name: string, children: AstNode[], alias = '', isOperator = false): AstNode => ({
  class: 'FUNCTION',
  type: 'FUNCTION',
  alias,
  function_name: name,
  schema: '',
  children,
  filter: null,
  order_bys: { type: 'ORDER_MODIFIER', orders: [] },
  distinct: false,
  is_operator: isOperator,
  export_state: false,
  catalog: '',
});
const coalesce = (children: AstNode[]): AstNode => ({
  class: 'OPERATOR',
  type: 'OPERATOR_COALESCE',
  alias: '',
  children,
});
const withAlias = (expr: AstNode, alias: string): AstNode => ({ ...expr, alias });
const baseTable = (name: string): AstNode => ({
  type: 'BASE_TABLE',
  alias: '',
  sample: null,
  schema_name: '',
  table_name: name,
  column_name_alias: [],
  catalog_name: '',
  at_clause: null,
});

/** A plain SELECT_NODE with the given parts; everything else empty. */
export const selectNode = (parts: AstNode): AstNode => ({
  type: 'SELECT_NODE',
  modifiers: [],
  cte_map: { map: [] },
  select_list: [],
  from_table: { type: 'EMPTY', alias: '', sample: null },
  where_clause: null,
  group_expressions: [],
  group_sets: [],
  aggregate_handling: 'STANDARD_HANDLING',
  having: null,
  sample: null,
  qualify: null,
  ...parts,
});

/** CAST(expr AS type) for a type without parameters. */
const castTo = (expr: AstNode, type: string): AstNode => ({
  class: 'CAST',
  type: 'OPERATOR_CAST',
  alias: expr.alias ?? '',
  child: { ...expr, alias: '' },
  cast_type: { id: type, type_info: null },
  try_cast: false,
});

// ── time bounds ──────────────────────────────────────────────────────────────────────────────

const isConstantLike = (n: AstNode | null | undefined): boolean =>
  !!n && (n.class === 'CONSTANT' || (n.class === 'CAST' && isConstantLike(n.child)));

const isColumn = (n: AstNode | null | undefined, column: string): boolean =>
  !!n && n.class === 'COLUMN_REF' && String(n.column_names.at(-1)).toLowerCase() === column.toLowerCase();

/** Bounds on `column` from the top-level AND of a WHERE clause; anything else is ignored (never pruned on). */
export function timeBounds(where: AstNode | null, column: string): TimeBounds {
  const bounds: TimeBounds = { lower: [], upper: [] };
  const conjuncts = (n: AstNode | null): AstNode[] =>
    !n ? [] : n.type === 'CONJUNCTION_AND' ? (n.children as AstNode[]).flatMap(conjuncts) : [n];
  for (const c of conjuncts(where)) {
    if (c.class === 'BETWEEN' && isColumn(c.input, column) && isConstantLike(c.lower) && isConstantLike(c.upper)) {
      bounds.lower.push(c.lower);
      bounds.upper.push(c.upper);
      continue;
    }
    if (c.class !== 'COMPARISON') continue;
    const flipped: Record<string, string> = {
      COMPARE_GREATERTHAN: 'COMPARE_LESSTHAN',
      COMPARE_GREATERTHANOREQUALTO: 'COMPARE_LESSTHANOREQUALTO',
      COMPARE_LESSTHAN: 'COMPARE_GREATERTHAN',
      COMPARE_LESSTHANOREQUALTO: 'COMPARE_GREATERTHANOREQUALTO',
      COMPARE_EQUAL: 'COMPARE_EQUAL',
    };
    let op = c.type as string;
    let value: AstNode;
    if (isColumn(c.left, column) && isConstantLike(c.right)) value = c.right;
    else if (isColumn(c.right, column) && isConstantLike(c.left)) {
      value = c.left;
      op = flipped[op] ?? op;
    } else continue;
    if (op === 'COMPARE_GREATERTHAN' || op === 'COMPARE_GREATERTHANOREQUALTO' || op === 'COMPARE_EQUAL')
      bounds.lower.push(value);
    if (op === 'COMPARE_LESSTHAN' || op === 'COMPARE_LESSTHANOREQUALTO' || op === 'COMPARE_EQUAL')
      bounds.upper.push(value);
  }
  return bounds;
}

// ── planning ─────────────────────────────────────────────────────────────────────────────────

export function planQuery(input: PlanInput): QueryPlan {
  const { node } = input;
  const { tables, occurrences } = referencedRelations(node);
  const rowsPlan = (reason: string): QueryPlan => {
    const bounds = new Map<string, TimeBounds>();
    // Pruning by the top-level WHERE is only sound when it is the table's one appearance.
    const readsTableDirectly =
      node.from_table?.type === 'BASE_TABLE' &&
      node.from_table.table_name === tables[0] &&
      (node.cte_map?.map ?? []).length === 0;
    if (node.type === 'SELECT_NODE' && readsTableDirectly && occurrences === 1) {
      const info = input.tables.get(tables[0]!);
      if (info) bounds.set(tables[0]!, timeBounds(node.where_clause, info.timestampColumn));
    }
    return { kind: 'rows', tables, bounds, reason };
  };

  if (node.type !== 'SELECT_NODE') return rowsPlan('set operation');
  if (node.from_table?.type !== 'BASE_TABLE' || occurrences !== 1)
    return rowsPlan('more than one table or a subquery in FROM');
  if ((node.cte_map?.map ?? []).length > 0) return rowsPlan('common table expressions');
  if (some(node, (n) => n.class === 'SUBQUERY')) return rowsPlan('subquery');
  if (some(node, (n) => n.class === 'WINDOW')) return rowsPlan('window function');
  if (node.qualify || node.sample || node.from_table.sample) return rowsPlan('QUALIFY or SAMPLE');
  const distinct = (node.modifiers as AstNode[]).find((m) => m.type === 'DISTINCT_MODIFIER');
  if (distinct && (distinct.distinct_on_targets ?? []).length > 0) return rowsPlan('DISTINCT ON');
  if ((node.group_sets as unknown[]).length > 1) return rowsPlan('grouping sets');

  const table = tables[0]!;
  const info = input.tables.get(table);
  if (!info) return rowsPlan('unknown table');
  const bounds = timeBounds(node.where_clause, info.timestampColumn);
  const isAggregate = (n: AstNode) =>
    n.class === 'FUNCTION' && input.aggregateFunctions.has(String(n.function_name).toLowerCase());
  const hasAggregates = some([node.select_list, node.having, node.modifiers], isAggregate);
  if (node.aggregate_handling === 'FORCE_AGGREGATES' && (node.group_expressions as unknown[]).length === 0) {
    // GROUP BY ALL: the select items without an aggregate are the keys.
    const keys = (node.select_list as AstNode[])
      .filter((item) => !some(item, isAggregate))
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
  const hasGroups = (node.group_expressions as unknown[]).length > 0;

  if (hasAggregates || hasGroups || node.having) {
    if (distinct) return rowsPlan('SELECT DISTINCT over aggregates');
    return (
      planAggregate(input, table, info.columns, bounds, isAggregate) ?? rowsPlan('aggregate that does not decompose')
    );
  }
  return planSelect(input, table, bounds) ?? rowsPlan('ORDER BY or LIMIT that the coordinator cannot finish');
}

function planAggregate(
  input: PlanInput,
  table: string,
  columns: readonly string[],
  bounds: TimeBounds,
  isAggregate: (n: AstNode) => boolean,
): QueryPlan | undefined {
  const { node } = input;
  const partialsTable = input.partialsTable ?? PARTIALS_TABLE;
  // Collect the distinct aggregate calls; each must decompose (or be keyed) and hold no aggregate inside.
  const calls: AstNode[] = [];
  /** Expressions the partial also groups by: arguments and filters of keyed aggregates. */
  const keys: AstNode[] = [];
  const keyOf = (expr: AstNode): number => {
    let k = keys.findIndex((e) => sameExpression(e, expr));
    if (k < 0) k = keys.push(expr) - 1;
    return k;
  };
  const keyed = new Set<AstNode>();
  let decomposable = true;
  const collect = (tree: unknown) =>
    walkAggregates(tree, isAggregate, (call) => {
      const name = String(call.function_name).toLowerCase();
      const args = call.children as AstNode[];
      const orders = (call.order_bys?.orders ?? []) as AstNode[];
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

  // GROUP BY 1 and GROUP BY alias name a select item; resolve them to the expressions they name.
  const knownColumns = new Set(columns.map((c) => c.toLowerCase()));
  const groups = (node.group_expressions as AstNode[]).map((g) => {
    if (g.class === 'CONSTANT' && Number.isInteger(g.value?.value))
      return (node.select_list as AstNode[])[g.value.value - 1];
    if (
      g.class === 'COLUMN_REF' &&
      g.column_names.length === 1 &&
      !knownColumns.has(String(g.column_names[0]).toLowerCase())
    ) {
      return (
        (node.select_list as AstNode[]).find(
          (s) => String(s.alias).toLowerCase() === String(g.column_names[0]).toLowerCase(),
        ) ?? g
      );
    }
    return g;
  });
  if (groups.some((g) => g === undefined || some(g, isAggregate))) return undefined;

  // Keyed aggregates: their arguments (and filters) become keys k0, k1, ... of the partial.
  const keyRef = (expr: AstNode): AstNode => (isConstantLike(expr) ? clone(expr) : columnRef(`k${keyOf(expr)}`));
  const keyedFinal = (c: AstNode): AstNode => ({
    ...clone(c),
    alias: '',
    children: (c.children as AstNode[]).map(keyRef),
    filter: c.filter ? columnRef(`k${keyOf(c.filter)}`) : null,
    order_bys: {
      ...c.order_bys,
      orders: ((c.order_bys?.orders ?? []) as AstNode[]).map((o) => ({ ...o, expression: keyRef(o.expression) })),
    },
  });

  const partialSelect: AstNode[] = groups.map((g, i) => withAlias(clone(g!), `g${i}`));
  const aggregateParts: AstNode[] = [];
  const finals: AstNode[] = calls.map((c, k) => {
    if ([...keyed].some((kc) => sameExpression(kc, c))) return keyedFinal(c);
    const name = String(c.function_name).toLowerCase();
    const args = clone(c.children as AstNode[]);
    const part = (fn: string, suffix = '') => {
      aggregateParts.push({ ...call(fn, clone(args), `a${k}${suffix}`), filter: c.filter ? clone(c.filter) : null });
      return columnRef(`a${k}${suffix}`);
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
  partialSelect.push(...keys.map((e, j) => withAlias(clone(e), `k${j}`)), ...aggregateParts);

  const rewrite = (tree: AstNode): AstNode => {
    const k = calls.findIndex((c) => isAggregate(tree) && sameExpression(c, tree));
    if (k >= 0) return withAlias(clone(finals[k]!), tree.alias ?? '');
    const g = groups.findIndex((group) => sameExpression(group, tree));
    if (g >= 0 && tree.class !== 'CONSTANT') return columnRef(`g${g}`, tree.alias ?? '');
    return mapChildren(tree, rewrite);
  };

  const partialKeys = [...groups.map((g) => clone(g!)), ...keys.map((e) => clone(e))];
  const groupSets = (n: number) => (n > 0 ? [Array.from({ length: n }, (_, i) => i)] : []);
  const partial: AstNode = {
    ...clone(node),
    select_list: partialSelect,
    group_expressions: partialKeys,
    group_sets: groupSets(partialKeys.length),
    having: null,
    modifiers: [],
  };
  const final: AstNode = {
    ...clone(node),
    select_list: (node.select_list as AstNode[]).map((item, i) =>
      withAlias(rewrite(item), input.outputColumns[i] ?? item.alias ?? ''),
    ),
    from_table: baseTable(partialsTable),
    where_clause: null,
    group_expressions: groups.map((_, i) => columnRef(`g${i}`)),
    group_sets: groupSets(groups.length),
    having: node.having ? rewrite(node.having) : null,
    modifiers: (node.modifiers as AstNode[]).map((m) =>
      m.type === 'ORDER_MODIFIER'
        ? { ...m, orders: m.orders.map((o: AstNode) => ({ ...o, expression: rewrite(o.expression) })) }
        : clone(m),
    ),
  };
  return { kind: 'aggregate', table, bounds, partial, final };
}

function planSelect(input: PlanInput, table: string, bounds: TimeBounds): QueryPlan | undefined {
  const { node, outputColumns } = input;
  const distinct = (node.modifiers as AstNode[]).find((m) => m.type === 'DISTINCT_MODIFIER');
  if (new Set(outputColumns.map((c) => c.toLowerCase())).size !== outputColumns.length) return undefined;
  const order = (node.modifiers as AstNode[]).find((m) => m.type === 'ORDER_MODIFIER');
  const limit = (node.modifiers as AstNode[]).find((m) => m.type === 'LIMIT_MODIFIER');
  const constant = (n: AstNode | null | undefined): bigint | undefined => {
    if (n == null) return 0n;
    const value: unknown = n.class === 'CONSTANT' ? n.value?.value : undefined;
    return typeof value === 'bigint' || Number.isInteger(value) ? BigInt(value as number | bigint) : undefined;
  };

  // ORDER BY must name output columns, so that the coordinator can order the union.
  const finalOrders: AstNode[] = [];
  for (const o of order?.orders ?? []) {
    const e = o.expression as AstNode;
    let name: string | undefined;
    if (e.class === 'CONSTANT' && Number.isInteger(e.value?.value)) name = outputColumns[e.value.value - 1];
    else if (e.class === 'COLUMN_REF' && e.column_names.length === 1)
      name = outputColumns.find((c) => c.toLowerCase() === String(e.column_names[0]).toLowerCase());
    if (name === undefined) {
      const i = (node.select_list as AstNode[]).findIndex((s) => sameExpression(s, e));
      name = i >= 0 ? outputColumns[i] : undefined;
    }
    if (name === undefined) return undefined;
    finalOrders.push({ ...o, expression: columnRef(name) });
  }

  // Owners each send their distinct rows (or, ordered and limited, their top-k); the final stage does the same over the union.
  const partialModifiers: AstNode[] = distinct ? [clone(distinct)] : order ? [clone(order)] : [];
  if (limit && !distinct) {
    const [l, o] = [constant(limit.limit), constant(limit.offset)];
    if (l === undefined || o === undefined || limit.limit == null) return undefined;
    partialModifiers.push({ type: 'LIMIT_MODIFIER', limit: integer(l + o), offset: null });
  }
  const partial: AstNode = { ...clone(node), modifiers: partialModifiers };
  const final = selectNode({
    modifiers: [
      ...(distinct ? [clone(distinct)] : []),
      ...(finalOrders.length > 0 ? [{ ...order, orders: finalOrders }] : []),
      ...(limit ? [clone(limit)] : []),
    ],
    select_list: [
      {
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
      },
    ],
    from_table: baseTable(input.partialsTable ?? PARTIALS_TABLE),
  });
  return { kind: 'select', table, bounds, partial, final };
}

/** Visits the outermost aggregate calls in a tree (not aggregates nested inside them). */
function walkAggregates(tree: unknown, isAggregate: (n: AstNode) => boolean, visit: (call: AstNode) => void): void {
  if (Array.isArray(tree)) {
    for (const item of tree) walkAggregates(item, isAggregate, visit);
  } else if (tree !== null && typeof tree === 'object') {
    if (isAggregate(tree as AstNode)) visit(tree as AstNode);
    else for (const value of Object.values(tree)) walkAggregates(value, isAggregate, visit);
  }
}

/** A copy of an expression with `map` applied to each child expression. */
function mapChildren(tree: AstNode, map: (child: AstNode) => AstNode): AstNode {
  const out: AstNode = {};
  for (const [key, value] of Object.entries(tree)) {
    if (Array.isArray(value)) out[key] = value.map((v) => (isExpression(v) ? map(v) : mapNested(v, map)));
    else if (isExpression(value)) out[key] = map(value as AstNode);
    else out[key] = mapNested(value, map);
  }
  return out;
}

function mapNested(value: unknown, map: (child: AstNode) => AstNode): unknown {
  if (Array.isArray(value)) return value.map((v) => mapNested(v, map));
  if (value !== null && typeof value === 'object')
    return isExpression(value) ? map(value as AstNode) : mapChildren(value as AstNode, map);
  return value;
}

const isExpression = (value: unknown): boolean =>
  value !== null && typeof value === 'object' && 'class' in (value as object);

// ── the scan stage of every table read ───────────────────────────────────────────────────────

/** One place a query reads a catalog table, and the SELECT that reads it directly (if any). */
export interface TableRead {
  /** The BASE_TABLE node in the query's tree. */
  ref: AstNode;
  table: string;
  /** The SELECT_NODE whose FROM is exactly this table: its WHERE filters only this read. */
  select?: AstNode;
}

/** Every read of a catalog table in the tree, in order, resolved the way DuckDB scopes CTEs. */
export function tableReads(node: AstNode): TableRead[] {
  const reads: TableRead[] = [];
  const selectOf = new Map<AstNode, AstNode>();
  walk(node, (n) => {
    if (n.type === 'SELECT_NODE' && n.from_table?.type === 'BASE_TABLE') selectOf.set(n.from_table as AstNode, n);
  });
  walkInScope(node, (n, ctes) => {
    if (n.type === 'BASE_TABLE' && typeof n.table_name === 'string' && !ctes.has(n.table_name.toLowerCase())) {
      reads.push({ ref: n, table: n.table_name.toLowerCase(), select: selectOf.get(n) });
    }
  });
  return reads;
}

/** The name a read's columns are qualified by in the query: its alias, else the table's name. */
export const readName = (read: TableRead): string => String(read.ref.alias || read.ref.table_name);

/**
 * The columns of `columns` a query may read from a table: every one whose name appears in a
 * column reference anywhere in the query (a superset, never too few); all of them where a star,
 * COLUMNS(), a NATURAL join, positional column aliases or the whole row (`SELECT t FROM t`) may
 * reach columns by no name.
 */
export function namedColumns(node: AstNode, read: TableRead, columns: readonly string[]): string[] {
  const names = new Set<string>();
  const relationNames = new Set<string>();
  walk(node, (n) => {
    if (n.type === 'BASE_TABLE') relationNames.add(String(n.alias || n.table_name).toLowerCase());
    if (typeof n.alias === 'string' && n.alias) relationNames.add(n.alias.toLowerCase());
  });
  let all = (read.ref.column_name_alias ?? []).length > 0;
  walk(node, (n) => {
    if (n.class === 'STAR' || (n.type === 'JOIN' && n.ref_type === 'NATURAL')) all = true;
    if (n.type === 'JOIN') for (const c of (n.using_columns ?? []) as string[]) names.add(String(c).toLowerCase());
    if (n.class === 'COLUMN_REF') {
      const parts = (n.column_names as unknown[]).map((p) => String(p).toLowerCase());
      if (parts.length === 1 && relationNames.has(parts[0]!)) all = true;
      for (const part of parts) names.add(part);
    }
  });
  return all ? [...columns] : columns.filter((c) => names.has(c.toLowerCase()));
}

/** Functions whose value changes from call to call: a filter with one must run once, in the final stage. */
const VOLATILE = new Set(['random', 'uuid', 'gen_random_uuid', 'uuidv4', 'uuidv7', 'nextval', 'currval', 'setseed']);

/** True when every column `expr` names is one of the read's own (bare, or qualified by its name): no outer reference. */
function readsOnly(expr: unknown, read: TableRead, columns: ReadonlySet<string>): boolean {
  const name = readName(read).toLowerCase();
  let ok = true;
  walk(expr, (n) => {
    if (n.class !== 'COLUMN_REF') return;
    const parts = (n.column_names as unknown[]).map((p) => String(p).toLowerCase());
    ok &&=
      (parts.length === 1 && columns.has(parts[0]!)) ||
      (parts.length === 2 && parts[0] === name && columns.has(parts[1]!));
  });
  return ok;
}

/**
 * The conjuncts of the WHERE over a read that owners can apply before sending rows: each needs
 * only the row (its own columns, no subquery, aggregate, window or volatile function). The final
 * stage applies the whole WHERE again, which changes nothing for these.
 */
export function pushableConjuncts(
  read: TableRead,
  columns: readonly string[],
  aggregateFunctions: ReadonlySet<string>,
): AstNode[] {
  const select = read.select;
  if (!select?.where_clause || read.ref.sample || select.sample) return [];
  const known = new Set(columns.map((c) => c.toLowerCase()));
  const conjuncts = (n: AstNode): AstNode[] =>
    n.type === 'CONJUNCTION_AND' ? (n.children as AstNode[]).flatMap(conjuncts) : [n];
  return conjuncts(select.where_clause as AstNode).filter(
    (c) =>
      readsOnly(c, read, known) &&
      !some(
        c,
        (n) => n.class === 'SUBQUERY' || n.class === 'WINDOW' || n.class === 'LAMBDA' || n.class === 'PARAMETER',
      ) &&
      !some(
        c,
        (n) =>
          n.class === 'FUNCTION' &&
          (aggregateFunctions.has(String(n.function_name).toLowerCase()) ||
            VOLATILE.has(String(n.function_name).toLowerCase())),
      ),
  );
}

/**
 * True when the SELECT over a read refers to nothing outside it (no correlated column, no
 * subquery): owners can run its partial. A name that is none of the table's columns may be one
 * of the SELECT's own aliases, where DuckDB lets GROUP BY, HAVING and ORDER BY use them.
 */
export function selfContained(read: TableRead, columns: readonly string[]): boolean {
  const select = read.select;
  if (!select) return false;
  const aliases = new Set(
    (select.select_list as AstNode[]).map((s) => String(s.alias ?? '').toLowerCase()).filter(Boolean),
  );
  const known = new Set(columns.map((c) => c.toLowerCase()));
  const clauses = [select.select_list, select.where_clause, select.qualify];
  const named = [select.group_expressions, select.having, select.modifiers];
  return (
    !some(select, (n) => n.class === 'SUBQUERY') &&
    readsOnly(clauses, read, known) &&
    readsOnly(named, read, new Set([...known, ...aliases]))
  );
}

/** A select of the read's named columns, filtered by its pushable conjuncts: what owners send for a `rows` input. */
export function rowsSelect(read: TableRead, columns: readonly string[], conjuncts: AstNode[]): AstNode {
  const where =
    conjuncts.length === 0
      ? null
      : conjuncts.length === 1
        ? clone(conjuncts[0]!)
        : { class: 'CONJUNCTION', type: 'CONJUNCTION_AND', alias: '', children: conjuncts.map(clone) };
  const name = readName(read);
  return selectNode({
    select_list: columns.map((c) => ({ ...columnRef(c), column_names: [name, c], alias: c })),
    from_table: { ...clone(read.ref), alias: name, sample: null, column_name_alias: [] },
    where_clause: where,
  });
}

/** The read replaced by the final stage's input: a table of that name, under the read's own name. */
export function inputTable(read: TableRead, input: string): AstNode {
  return {
    ...baseTable(input),
    alias: readName(read),
    sample: read.ref.sample ?? null,
    column_name_alias: read.ref.column_name_alias ?? [],
  };
}

/** A deep copy of the tree with some of its nodes (by identity) swapped for others. */
export function replaceNodes(tree: unknown, replacements: ReadonlyMap<AstNode, AstNode>): unknown {
  if (Array.isArray(tree)) return tree.map((t) => replaceNodes(t, replacements));
  if (tree === null || typeof tree !== 'object') return tree;
  const swap = replacements.get(tree as AstNode);
  if (swap) return clone(swap);
  const out: AstNode = {};
  for (const [key, value] of Object.entries(tree)) out[key] = replaceNodes(value, replacements);
  return out;
}

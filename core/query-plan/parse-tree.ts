/**
 * DuckDB's parse tree (json_serialize_sql) as the planner sees it: the nodes it reads, walks over
 * the tree, and builders for the nodes it writes. Pure functions: parsing and writing the tree
 * back as SQL happen in the caller.
 *
 * Only the node kinds Berth reads or builds have a type here, and only with the fields it uses:
 * every other part of the tree passes through as an `AstNode`, whose fields stay `unknown` until
 * a guard below names the node's kind.
 */

/** Any node of the tree, of a kind Berth passes through untouched: every field is `unknown`. */
export interface AstNode {
  [field: string]: unknown;
}

// ── expressions ──────────────────────────────────────────────────────────────────────────────

/** An expression (a ParsedExpression): its class says its kind, its type the kind's variant. */
export interface Expression extends AstNode {
  class: string;
  type: string;
  /** `AS name`, or '' for none. */
  alias: string;
}

/** A column reference as DuckDB parses it: `a`, `t.a`, `s.field`, `t.s.field` (quotes gone, case kept). */
export interface ColumnRefNode extends Expression {
  class: 'COLUMN_REF';
  column_names: string[];
}

/** `#n`: the n-th column of the FROM clause, whatever its name. */
export interface PositionalReferenceNode extends Expression {
  class: 'POSITIONAL_REFERENCE';
  index: number;
}

/** A type as DuckDB names it: `{ id: 'BIGINT', type_info: null }`. */
export interface LogicalType extends AstNode {
  id: string;
  type_info: AstNode | null;
}

/** A literal: its type and its value (a number, bigint, string, ... as parse-tree-json.ts reads it). */
export interface ConstantNode extends Expression {
  class: 'CONSTANT';
  value: { type: LogicalType; is_null: boolean; value?: unknown };
}

/** A function call, aggregates among them: `count(DISTINCT a ORDER BY b) FILTER (WHERE c)`. */
export interface FunctionNode extends Expression {
  class: 'FUNCTION';
  function_name: string;
  schema: string;
  catalog: string;
  children: Expression[];
  filter: Expression | null;
  order_bys: OrderModifier;
  distinct: boolean;
  is_operator: boolean;
  export_state: boolean;
}

/** An operator over its children: COALESCE, IN, NOT, IS NULL, ... */
export interface OperatorNode extends Expression {
  class: 'OPERATOR';
  children: Expression[];
}

/** `left <op> right`, the operator in its type (COMPARE_EQUAL, COMPARE_LESSTHAN, ...). */
export interface ComparisonNode extends Expression {
  class: 'COMPARISON';
  left: Expression;
  right: Expression;
}

/** `input BETWEEN lower AND upper`. */
export interface BetweenNode extends Expression {
  class: 'BETWEEN';
  input: Expression;
  lower: Expression;
  upper: Expression;
}

/** AND or OR (by its type) over two or more children. */
export interface ConjunctionNode extends Expression {
  class: 'CONJUNCTION';
  type: 'CONJUNCTION_AND' | 'CONJUNCTION_OR';
  children: Expression[];
}

/** `CAST(child AS cast_type)`, or TRY_CAST. */
export interface CastNode extends Expression {
  class: 'CAST';
  child: Expression;
  cast_type: LogicalType;
  try_cast: boolean;
}

/** A subquery in an expression: scalar, EXISTS, IN or ANY. */
export interface SubqueryNode extends Expression {
  class: 'SUBQUERY';
  subquery_type: string;
  subquery: AstNode;
}

/** `*`, `t.*`, `* EXCLUDE (...)`, `COLUMNS(...)`, ... */
export interface StarNode extends Expression {
  class: 'STAR';
  relation_name: string;
  exclude_list: unknown[];
  replace_list: unknown[];
  rename_list: unknown[];
  /** True for COLUMNS(...). */
  columns: boolean;
  /** The expression of COLUMNS(expr), if any. */
  expr: Expression | null;
}

// ── table references ─────────────────────────────────────────────────────────────────────────

/** Something FROM reads: a table, a join, a subquery, a table function, ... (by its type). */
export interface TableRef extends AstNode {
  type: string;
  alias: string;
  sample: AstNode | null;
}

/** A table named in FROM: `pr AS x(a, b)` has alias x and renames its first two columns a and b. */
export interface BaseTableNode extends TableRef {
  type: 'BASE_TABLE';
  table_name: string;
  schema_name: string;
  catalog_name: string;
  column_name_alias: string[];
}

/** A join; NATURAL and USING joins match columns by name. */
export interface JoinNode extends TableRef {
  type: 'JOIN';
  left: TableRef;
  right: TableRef;
  /** INNER, LEFT, RIGHT, FULL, SEMI, ANTI, ... */
  join_type: string;
  /** REGULAR, NATURAL, CROSS, POSITIONAL, ASOF, DEPENDENT (LATERAL). */
  ref_type: string;
  using_columns: string[];
}

/** A table function in FROM: `read_parquet('...')`. */
export interface TableFunctionNode extends TableRef {
  type: 'TABLE_FUNCTION';
  function: FunctionNode;
}

// ── query nodes and their modifiers ──────────────────────────────────────────────────────────

/** A result modifier of a query: ORDER BY, DISTINCT, LIMIT, ... (by its type). */
export interface ResultModifier extends AstNode {
  type: string;
}

/** One term of an ORDER BY. */
export interface OrderByNode extends AstNode {
  type: string;
  null_order: string;
  expression: Expression;
}

export interface OrderModifier extends ResultModifier {
  type: 'ORDER_MODIFIER';
  orders: OrderByNode[];
}

/** SELECT DISTINCT, or DISTINCT ON (targets). */
export interface DistinctModifier extends ResultModifier {
  type: 'DISTINCT_MODIFIER';
  distinct_on_targets: Expression[];
}

export interface LimitModifier extends ResultModifier {
  type: 'LIMIT_MODIFIER';
  limit: Expression | null;
  offset: Expression | null;
}

/** A common table expression a query declares: its name, and its body, which Berth only walks. */
export interface CommonTableExpression extends AstNode {
  key: string;
  value: AstNode;
}

/** A query: a SELECT, a set operation or a recursive CTE, with its modifiers and its WITH. */
export interface QueryNode extends AstNode {
  type: string;
  modifiers: ResultModifier[];
  cte_map: { map: CommonTableExpression[] };
}

export interface SelectNode extends QueryNode {
  type: 'SELECT_NODE';
  select_list: Expression[];
  from_table: TableRef;
  where_clause: Expression | null;
  group_expressions: Expression[];
  /** Each set lists indexes into group_expressions; GROUP BY a, b is one set [0, 1]. */
  group_sets: number[][];
  /** STANDARD_HANDLING, or FORCE_AGGREGATES for GROUP BY ALL. */
  aggregate_handling: string;
  having: Expression | null;
  sample: AstNode | null;
  qualify: Expression | null;
}

/** `WITH RECURSIVE name AS (left UNION right)`: right may read name, left may not. */
export interface RecursiveCteNode extends QueryNode {
  type: 'RECURSIVE_CTE_NODE';
  cte_name: string;
  left: QueryNode;
  right: QueryNode;
}

// ── guards: what a node is, by its class or type ─────────────────────────────────────────────
// A guard trusts the tag: json_serialize_sql writes every field of a node's kind, as the builders do.

const isNode = (n: unknown): n is AstNode => typeof n === 'object' && n !== null;
const ofClass =
  <T extends Expression>(name: T['class']) =>
  (n: unknown): n is T =>
    isNode(n) && n.class === name;
const ofType =
  <T extends AstNode & { type: string }>(name: T['type']) =>
  (n: unknown): n is T =>
    isNode(n) && n.type === name;

export const isColumnRef = ofClass<ColumnRefNode>('COLUMN_REF');
/** `#n`: the n-th column of the FROM clause, whatever its name. */
export const isPositional = ofClass<PositionalReferenceNode>('POSITIONAL_REFERENCE');
export const isConstant = ofClass<ConstantNode>('CONSTANT');
export const isFunction = ofClass<FunctionNode>('FUNCTION');
export const isComparison = ofClass<ComparisonNode>('COMPARISON');
export const isBetween = ofClass<BetweenNode>('BETWEEN');
export const isCast = ofClass<CastNode>('CAST');
export const isSubquery = ofClass<SubqueryNode>('SUBQUERY');
export const isStar = ofClass<StarNode>('STAR');
/** An AND, by its type alone. */
export const isConjunctionAnd = ofType<ConjunctionNode & { type: 'CONJUNCTION_AND' }>('CONJUNCTION_AND');
export const isBaseTable = ofType<BaseTableNode>('BASE_TABLE');
/** Anything FROM reads (a table, join, subquery, table function, VALUES): it has a sample clause and no class. */
export const isTableRef = (n: unknown): n is TableRef => isNode(n) && !('class' in n) && 'sample' in n;
export const isJoin = ofType<JoinNode>('JOIN');
export const isTableFunction = ofType<TableFunctionNode>('TABLE_FUNCTION');
export const isSelectNode = ofType<SelectNode>('SELECT_NODE');
export const isRecursiveCte = ofType<RecursiveCteNode>('RECURSIVE_CTE_NODE');
export const isOrderModifier = ofType<OrderModifier>('ORDER_MODIFIER');
export const isDistinctModifier = ofType<DistinctModifier>('DISTINCT_MODIFIER');
export const isLimitModifier = ofType<LimitModifier>('LIMIT_MODIFIER');

/** The CTEs a node declares (a query's WITH), in order; none for any other node. */
export const commonTableExpressions = (n: AstNode): CommonTableExpression[] =>
  (n as Partial<QueryNode>).cte_map?.map ?? [];

/** The value of an integer constant held as a number, as in `GROUP BY 2` and `ORDER BY 1`; else undefined. */
export function integerConstant(n: unknown): number | undefined {
  const value = isConstant(n) ? n.value?.value : undefined;
  return typeof value === 'number' && Number.isInteger(value) ? value : undefined;
}

// ── walking the tree ─────────────────────────────────────────────────────────────────────────

/** Calls visit on every object in the tree, parents first. */
export function walk(tree: unknown, visit: (node: AstNode) => void): void {
  if (Array.isArray(tree)) {
    for (const item of tree) walk(item, visit);
  } else if (tree !== null && typeof tree === 'object') {
    visit(tree as AstNode);
    for (const value of Object.values(tree)) walk(value, visit);
  }
}

export const some = (tree: unknown, test: (node: AstNode) => boolean): boolean => {
  let found = false;
  walk(tree, (node) => (found ||= test(node)));
  return found;
};

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

export const clone = <T>(tree: T): T => structuredClone(tree);

// ── expression builders (the shapes json_serialize_sql produces) ─────────────────────────────

export const columnRef = (name: string, alias = ''): ColumnRefNode => ({
  class: 'COLUMN_REF',
  type: 'COLUMN_REF',
  alias,
  column_names: [name],
});
export const integer = (value: number | bigint): ConstantNode => ({
  class: 'CONSTANT',
  type: 'VALUE_CONSTANT',
  alias: '',
  value: { type: { id: 'BIGINT', type_info: null }, is_null: false, value },
});
export const call = (name: string, children: Expression[], alias = '', isOperator = false): FunctionNode => ({
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
export const coalesce = (children: Expression[]): OperatorNode => ({
  class: 'OPERATOR',
  type: 'OPERATOR_COALESCE',
  alias: '',
  children,
});
export const withAlias = <T extends Expression>(expr: T, alias: string): T => ({ ...expr, alias });
export const baseTable = (name: string): BaseTableNode => ({
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
export const selectNode = (parts: Partial<SelectNode>): SelectNode => ({
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
export const castTo = (expr: Expression, type: string): CastNode => ({
  class: 'CAST',
  type: 'OPERATOR_CAST',
  alias: expr.alias ?? '',
  child: { ...expr, alias: '' },
  cast_type: { id: type, type_info: null },
  try_cast: false,
});

/** A constant, or a cast of one (a TIMESTAMP literal is a cast of a string). */
export const isConstantLike = (n: unknown): boolean => isConstant(n) || (isCast(n) && isConstantLike(n.child));

/**
 * The functions a time bound's arithmetic parses into (`TIMESTAMP '…' - INTERVAL 1 HOUR` is `-`
 * over the TIMESTAMP's cast and `to_hours(CAST(trunc(CAST(1 AS DOUBLE)) AS BIGINT))`): of
 * constants, each gives the same value wherever it runs, every DuckDB being in UTC.
 */
const BOUND_ARITHMETIC = new Set([
  '+',
  '-',
  'trunc',
  'to_millennia',
  'to_centuries',
  'to_decades',
  'to_years',
  'to_quarters',
  'to_months',
  'to_weeks',
  'to_days',
  'to_hours',
  'to_minutes',
  'to_seconds',
  'to_milliseconds',
  'to_microseconds',
]);

/** Arithmetic of constants, as a time bound may be: `TIMESTAMP '…' + INTERVAL '1 day'` (of any type: `5 + 3` too). */
export const isConstantArithmetic = (n: unknown): n is FunctionNode =>
  isFunction(n) &&
  BOUND_ARITHMETIC.has(n.function_name.toLowerCase()) &&
  n.schema === '' &&
  n.catalog === '' &&
  n.filter === null &&
  !n.distinct &&
  n.order_bys.orders.length === 0 &&
  n.children.length > 0 &&
  n.children.every(isConstantExpression);

/** A constant, a cast of one, or arithmetic of such: a value the coordinator computes as any node would. */
export const isConstantExpression = (n: unknown): boolean =>
  isConstant(n) || (isCast(n) && isConstantExpression(n.child)) || isConstantArithmetic(n);

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

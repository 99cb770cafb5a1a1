/**
 * Which tables a query reads and which column a name means, resolved the way DuckDB binds them:
 * CTEs by their scope, columns by a read's alias and alias list.
 */
import {
  commonTableExpressions,
  isBaseTable,
  isFunction,
  isRecursiveCte,
  isSelectNode,
  isStar,
  isTableFunction,
  walk,
  type AstNode,
  type BaseTableNode,
  type ColumnRefNode,
  type SelectNode,
} from './parse-tree.js';

/** A table's timestamp column (null for a table without one: nothing bounds its time) and its columns, in order. */
export interface TableColumns {
  timestampColumn: string | null;
  columns: readonly string[];
}

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
    const ctes = commonTableExpressions(n);
    let inner = scope;
    if (ctes.length > 0) {
      const visible = new Set(scope);
      for (const cte of ctes) {
        go(cte.value, visible);
        visible.add(String(cte.key).toLowerCase());
      }
      inner = visible;
    }
    if (isRecursiveCte(n)) {
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
      forbidden.push(isTableFunction(n) ? `table function ${String(n.function?.function_name ?? '')}` : n.type);
    }
    if (isFunction(n) && FORBIDDEN_FUNCTIONS.has(String(n.function_name).toLowerCase()))
      forbidden.push(`function ${n.function_name}`);
    if (isBaseTable(n) && typeof n.table_name === 'string') {
      const qualified = [n.catalog_name, n.schema_name, n.table_name].filter(
        (part) => typeof part === 'string' && part !== '',
      );
      if (qualified.length > 1) forbidden.push(qualified.join('.'));
      else if (!ctes.has(n.table_name.toLowerCase())) tables.push(n.table_name);
    }
  });
  return { tables: [...new Set(tables)], occurrences: tables.length, forbidden: [...new Set(forbidden)] };
}

/** One place a query reads a catalog table, and the SELECT that reads it directly (if any). */
export interface TableRead {
  /** The BASE_TABLE node in the query's tree. */
  ref: BaseTableNode;
  table: string;
  /** The SELECT_NODE whose FROM is exactly this table: its WHERE filters only this read. */
  select?: SelectNode;
}

/** The name a read's columns are qualified by in the query: its alias, else the table's name. */
export const readName = (read: TableRead): string => String(read.ref.alias || read.ref.table_name);

/** The names the read's columns go by in its SELECT: an alias's column list renames the first ones. */
export const visibleColumns = (ref: BaseTableNode, columns: readonly string[]): string[] =>
  columns.map((c, i) => String(ref.column_name_alias?.[i] ?? c));

/** `*` or `t.*` over the read, every column as it is: no EXCLUDE, REPLACE, RENAME or COLUMNS(). */
export const isPlainStar = (n: AstNode, read: TableRead): boolean =>
  isStar(n) &&
  (!n.relation_name || String(n.relation_name).toLowerCase() === readName(read).toLowerCase()) &&
  (n.exclude_list ?? []).length === 0 &&
  (n.replace_list ?? []).length === 0 &&
  (n.rename_list ?? []).length === 0 &&
  !n.columns &&
  !n.expr;

/** A table column a reference names, and the struct fields it reads inside it (`s.ts`: column s, fields [ts]). */
export interface ResolvedColumn {
  column: string;
  fields: string[];
}

/**
 * The column of the read's table that a reference in the SELECT directly over it names, the way
 * DuckDB binds it: by the names the read gives its columns, bare or qualified by the read's name,
 * any further parts being struct fields (identifiers ignore case, quoted or not). Undefined when
 * the reference may name anything else (an outer column, a select alias, a lambda's parameter) or
 * reads two ways (a qualifier that is a column too): then no rewrite may rely on it.
 */
export function resolveColumn(
  ref: ColumnRefNode,
  read: TableRead,
  columns: readonly string[],
): ResolvedColumn | undefined {
  const visible = visibleColumns(read.ref, columns).map((c) => c.toLowerCase());
  const parts = ref.column_names.map((p) => String(p));
  const lower = parts.map((p) => p.toLowerCase());
  // A name two columns go by (`pr AS x(v)` beside a real v) names neither for sure.
  const unique = (name: string) => (visible.indexOf(name) === visible.lastIndexOf(name) ? visible.indexOf(name) : -1);
  let at: number;
  let fields: string[];
  if (parts.length > 1 && lower[0] === readName(read).toLowerCase()) {
    if (visible.includes(lower[0]!)) return undefined;
    [at, fields] = [unique(lower[1]!), parts.slice(2)];
  } else [at, fields] = [unique(lower[0]!), parts.slice(1)];
  return at < 0 ? undefined : { column: columns[at]!, fields };
}

/** Every read of a catalog table in the tree, in order, resolved the way DuckDB scopes CTEs. */
export function tableReads(node: AstNode): TableRead[] {
  const reads: TableRead[] = [];
  const selectOf = new Map<AstNode, SelectNode>();
  walk(node, (n) => {
    if (isSelectNode(n) && isBaseTable(n.from_table)) selectOf.set(n.from_table, n);
  });
  walkInScope(node, (n, ctes) => {
    if (isBaseTable(n) && typeof n.table_name === 'string' && !ctes.has(n.table_name.toLowerCase())) {
      reads.push({ ref: n, table: n.table_name.toLowerCase(), select: selectOf.get(n) });
    }
  });
  return reads;
}

/**
 * What owners send for a read the final stage needs as rows: the columns the query may read,
 * filtered by the conjuncts of its WHERE that only need the row, and the table the final stage
 * reads them back by.
 */
import {
  baseTable,
  clone,
  columnRef,
  isBaseTable,
  isColumnRef,
  isConjunctionAnd,
  isFunction,
  isJoin,
  isPositional,
  isStar,
  isSubquery,
  isTableRef,
  selectNode,
  some,
  walk,
  type AstNode,
  type BaseTableNode,
  type ColumnRefNode,
  type ConjunctionNode,
  type Expression,
  type SelectNode,
} from './parse-tree.js';
import { readName, resolveColumn, type TableRead } from './names.js';

/**
 * The columns of `columns` a query may read from a table: every one whose name appears in a
 * column reference anywhere in the query (a superset, never too few); all of them where a star,
 * COLUMNS(), a NATURAL join, positional column aliases, a positional reference (`#2`) or the
 * whole row (`SELECT t FROM t`) may reach columns by no name, or by their place.
 */
export function namedColumns(node: AstNode, read: TableRead, columns: readonly string[]): string[] {
  const names = new Set<string>();
  const relationNames = new Set<string>();
  walk(node, (n) => {
    if (isBaseTable(n)) relationNames.add(String(n.alias || n.table_name).toLowerCase());
    // Only a relation's alias: an expression's (`sum(bytes) AS bytes`) names no row.
    if (isTableRef(n) && n.alias) relationNames.add(n.alias.toLowerCase());
  });
  let all = (read.ref.column_name_alias ?? []).length > 0;
  walk(node, (n) => {
    if (isStar(n) || (isJoin(n) && n.ref_type === 'NATURAL') || isPositional(n)) all = true;
    if (isJoin(n)) for (const c of n.using_columns ?? []) names.add(String(c).toLowerCase());
    if (isColumnRef(n)) {
      const parts = n.column_names.map((p) => String(p).toLowerCase());
      if (parts.length === 1 && relationNames.has(parts[0]!)) all = true;
      for (const part of parts) names.add(part);
    }
  });
  return all ? [...columns] : columns.filter((c) => names.has(c.toLowerCase()));
}

/** Functions whose value changes from call to call: a filter with one must run once, in the final stage. */
const VOLATILE = new Set(['random', 'uuid', 'gen_random_uuid', 'uuidv4', 'uuidv7', 'nextval', 'currval', 'setseed']);

/**
 * True when every column `expr` names resolves to one of the read's own (or, where `aliases` are
 * given, is one of them): no outer reference, no name that could mean two things.
 */
function readsOnly(
  expr: unknown,
  read: TableRead,
  columns: readonly string[],
  aliases: ReadonlySet<string> = new Set(),
): boolean {
  let ok = true;
  walk(expr, (n) => {
    if (!isColumnRef(n)) return;
    ok &&=
      resolveColumn(n, read, columns) !== undefined ||
      (n.column_names.length === 1 && aliases.has(String(n.column_names[0]).toLowerCase()));
  });
  return ok;
}

/** A copy of the tree with every column reference replaced by `map`'s answer for it. */
function mapColumnRefs(tree: unknown, map: (ref: ColumnRefNode) => ColumnRefNode): unknown {
  if (Array.isArray(tree)) return tree.map((t) => mapColumnRefs(t, map));
  if (tree === null || typeof tree !== 'object') return tree;
  if (isColumnRef(tree)) return map(tree);
  return Object.fromEntries(Object.entries(tree).map(([key, value]) => [key, mapColumnRefs(value, map)]));
}

/**
 * The conjuncts of the WHERE over a read that owners can apply before sending rows: each needs
 * only the row (its own columns, no subquery, aggregate, window or volatile function, no `#n` or
 * COLUMNS()).
 * The final stage applies the whole WHERE again, which changes nothing for these. Owners read the
 * table by its name without the alias list, so each name is written as the column it resolves
 * to: under `pr AS x(w, v)`, `v > 1` is `x.w > 1` there.
 */
export function pushableConjuncts(
  read: TableRead,
  columns: readonly string[],
  aggregateFunctions: ReadonlySet<string>,
): Expression[] {
  const select = read.select;
  if (!select?.where_clause || read.ref.sample || select.sample) return [];
  const conjuncts = (n: Expression): Expression[] => (isConjunctionAnd(n) ? n.children.flatMap(conjuncts) : [n]);
  const pushable = conjuncts(select.where_clause).filter(
    (c) =>
      readsOnly(c, read, columns) &&
      !some(
        c,
        (n) =>
          isSubquery(n) ||
          n.class === 'WINDOW' ||
          n.class === 'LAMBDA' ||
          n.class === 'PARAMETER' ||
          // COLUMNS('re') matches the names the query gives the columns, which owners do not use.
          isStar(n) ||
          isPositional(n),
      ) &&
      !some(
        c,
        (n) =>
          isFunction(n) &&
          (aggregateFunctions.has(String(n.function_name).toLowerCase()) ||
            VOLATILE.has(String(n.function_name).toLowerCase())),
      ),
  );
  const name = readName(read);
  return pushable.map(
    (c) =>
      mapColumnRefs(c, (ref) => {
        const { column, fields } = resolveColumn(ref, read, columns)!;
        return { ...ref, column_names: [name, column, ...fields] };
      }) as Expression,
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
  const aliases = new Set(select.select_list.map((s) => String(s.alias ?? '').toLowerCase()).filter(Boolean));
  const clauses = [select.select_list, select.where_clause, select.qualify];
  const named = [select.group_expressions, select.having, select.modifiers];
  return !some(select, isSubquery) && readsOnly(clauses, read, columns) && readsOnly(named, read, columns, aliases);
}

/** A select of the read's named columns, filtered by its pushable conjuncts: what owners send for a `rows` input. */
export function rowsSelect(read: TableRead, columns: readonly string[], conjuncts: Expression[]): SelectNode {
  const where: Expression | null =
    conjuncts.length === 0
      ? null
      : conjuncts.length === 1
        ? clone(conjuncts[0]!)
        : ({
            class: 'CONJUNCTION',
            type: 'CONJUNCTION_AND',
            alias: '',
            children: conjuncts.map(clone),
          } satisfies ConjunctionNode);
  const name = readName(read);
  return selectNode({
    select_list: columns.map((c) => ({ ...columnRef(c), column_names: [name, c], alias: c })),
    from_table: { ...clone(read.ref), alias: name, sample: null, column_name_alias: [] },
    where_clause: where,
  });
}

/** The read replaced by the final stage's input: a table of that name, under the read's own name. */
export function inputTable(read: TableRead, input: string): BaseTableNode {
  return {
    ...baseTable(input),
    alias: readName(read),
    sample: read.ref.sample ?? null,
    column_name_alias: read.ref.column_name_alias ?? [],
  };
}

/**
 * Broadcast joins: a query whose FROM joins tables where all but one are small runs its join on
 * the owners of the big one, each owner joining its own segments of it to the whole of every
 * other table (which it reads from its cache or S3, never through the coordinator), so the SELECT
 * over the join splits as the SELECT over one read does and only partials move.
 *
 * The union of the owners' joins is the query's join exactly when no row of a whole table can come
 * out of the join without a row of the partitioned one: every join on the partitioned table's way
 * up the tree is inner or cross, or keeps the partitioned side (its LEFT or RIGHT outer join, a
 * semi or anti join with it on the left). A whole table's unmatched row would otherwise come out
 * once per owner.
 */
import { isBaseTable, isJoin, type AstNode, type BaseTableNode, type SelectNode, type TableRef } from './parse-tree.js';

/** The most tables one scan reads (the query node's ScanRequest): a join of more is never broadcast. */
export const MAX_JOINED_TABLES = 16;
/** How tables may be joined for a broadcast: by a condition, USING or NATURAL, or crossed. */
const REF_TYPES = new Set(['REGULAR', 'NATURAL', 'CROSS']);
/** The join types that never output a row of their right side without one of their left. */
const KEEPS_LEFT = new Set(['INNER', 'LEFT', 'SEMI', 'ANTI']);
/** And of their left side without one of their right. */
const KEEPS_RIGHT = new Set(['INNER', 'RIGHT']);

/**
 * The tables of a SELECT's FROM that may be its partitioned side, in the FROM's order: none unless
 * the FROM is a join of two or more tables, each named once, no sample on any, and every join of
 * a kind above. The rest of the query is the caller's: decompose.ts splits the SELECT over the join.
 */
export function partitionableTables(select: SelectNode): BaseTableNode[] {
  if (!isJoin(select.from_table) || select.sample) return [];
  const joinable = (ref: TableRef): boolean =>
    isBaseTable(ref)
      ? !ref.sample
      : isJoin(ref) && !ref.sample && REF_TYPES.has(ref.ref_type) && joinable(ref.left) && joinable(ref.right);
  if (!joinable(select.from_table)) return [];
  // An owner reads each table under its name: one name cannot be both its share and the whole.
  const tables = joinedTables(select.from_table);
  if (tables.length > MAX_JOINED_TABLES) return [];
  if (new Set(tables.map((t) => t.table_name.toLowerCase())).size < tables.length) return [];
  return tables.filter((table) => keeps(select.from_table, table));
}

/** The tables a join reads, left to right (a table or a join of tables only). */
export function joinedTables(ref: TableRef): BaseTableNode[] {
  if (isBaseTable(ref)) return [ref];
  return isJoin(ref) ? [...joinedTables(ref.left), ...joinedTables(ref.right)] : [];
}

/** Whether every join above `table` keeps its side: no row of the other side without one of its. */
function keeps(ref: AstNode, table: BaseTableNode): boolean {
  if (ref === table) return true;
  if (!isJoin(ref)) return false;
  if (contains(ref.left, table)) return KEEPS_LEFT.has(ref.join_type) && keeps(ref.left, table);
  return KEEPS_RIGHT.has(ref.join_type) && keeps(ref.right, table);
}

const contains = (ref: AstNode, table: BaseTableNode): boolean =>
  ref === table || (isJoin(ref) && (contains(ref.left, table) || contains(ref.right, table)));

/** The tables whose columns the SELECT over a join sees: a semi or anti join's right side is not among them. */
export function visibleTables(ref: TableRef): BaseTableNode[] {
  if (!isJoin(ref)) return joinedTables(ref);
  const hidesRight = ref.join_type === 'SEMI' || ref.join_type === 'ANTI';
  return [...visibleTables(ref.left), ...(hidesRight ? [] : visibleTables(ref.right))];
}

/** Whether a join may match `column` by name (USING it, or NATURAL): its bare name may then mean either side's. */
export function matchesByName(select: SelectNode, column: string): boolean {
  const byName = (ref: AstNode): boolean =>
    isJoin(ref) &&
    (ref.ref_type === 'NATURAL' ||
      ref.using_columns.some((c) => c.toLowerCase() === column.toLowerCase()) ||
      byName(ref.left) ||
      byName(ref.right));
  return byName(select.from_table);
}

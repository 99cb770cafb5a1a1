/**
 * A delete's predicate (`berth delete --where …`), checked like a query's WHERE: one condition
 * over the table's own columns, true or false for each row, with no subquery. It leaves here as a
 * whole statement DuckDB wrote back from the checked tree, `SELECT *, (<condition>) AS
 * berth_delete FROM "<table>"`, so that the worker wraps a complete query and never splices the
 * user's text into its own; with the time range the condition bounds, to prune segments by.
 */
import { tableReads } from '../../../core/query-plan/names.js';
import { isBaseTable, isSelectNode, isStar, isSubquery, some } from '../../../core/query-plan/parse-tree.js';
import { timeBounds } from '../../../core/query-plan/time-window.js';
import { quoteIdent } from '../../../core/identifiers.js';
import { badRequest } from '../../common/errors.js';
import type { TableInfo } from '../../meta/client.js';
import { DELETE_FLAG } from '../../../workflows/contracts/row-delete.js';
import { timeWindow } from './planner.js';
import type { SqlBinder } from './sql-binder.js';

export interface CheckedPredicate {
  /** `SELECT *, (<condition>) AS berth_delete FROM "<table>"`. */
  predicate: string;
  from?: number;
  to?: number;
}

const refused = (message: string) => badRequest('invalid_predicate', message);

export async function checkDeletePredicate(
  binder: SqlBinder,
  table: TableInfo,
  where: string,
): Promise<CheckedPredicate> {
  const node = await binder.parse(`SELECT * FROM ${quoteIdent(table.name)} WHERE ${where}`).catch((error: Error) => {
    throw refused(`the condition does not parse as one: ${error.message}`);
  });
  // Exactly SELECT * FROM t WHERE <condition>: text that closes the condition early and goes on
  // (a GROUP BY, a UNION, an ORDER BY, a LIMIT) parses into something else and is refused.
  const plain =
    isSelectNode(node) &&
    isBaseTable(node.from_table) &&
    !node.from_table.alias &&
    node.select_list.length === 1 &&
    isStar(node.select_list[0]) &&
    node.where_clause !== null &&
    node.group_expressions.length === 0 &&
    node.aggregate_handling === 'STANDARD_HANDLING' && // GROUP BY ALL has no expressions
    node.having === null &&
    node.qualify === null &&
    node.sample === null &&
    node.modifiers.length === 0 &&
    node.cte_map.map.length === 0;
  if (!plain) throw refused('a delete takes one condition on the table’s columns, as it would follow WHERE');
  if (some(node.where_clause, isSubquery))
    throw refused('a delete’s condition reads only the table’s own columns: no subquery');
  // Each segment is rewritten on its own: a condition over other rows would mean something else there.
  if (some(node.where_clause, (n) => n.class === 'WINDOW'))
    throw refused('a delete’s condition is about each row alone: no window function');
  const predicate = await binder.deparse({
    ...node,
    select_list: [node.select_list[0]!, { ...node.where_clause!, alias: DELETE_FLAG }],
    where_clause: null,
  });
  const columns = await binder.describe(predicate, [table]).catch((error: Error) => {
    throw refused(error.message.split('\n')[0]!);
  });
  const type = columns.at(-1)?.type;
  if (type !== 'BOOLEAN') throw refused(`a delete’s condition is true or false for each row; this one is ${type}`);
  const [read] = tableReads(node);
  const names = table.columns.map((c) => c.name);
  const bounds = timeBounds(node.where_clause, read!, { timestampColumn: table.timestampColumn, columns: names });
  return { predicate, ...(await timeWindow(binder, bounds)) };
}

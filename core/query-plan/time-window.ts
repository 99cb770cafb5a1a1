/**
 * The bounds a WHERE puts on a read's timestamp column, which the coordinator turns into the time
 * window it prunes segments by (the epoch milliseconds themselves: core/time-bounds.ts).
 */
import {
  isBetween,
  isColumnRef,
  isComparison,
  isConjunctionAnd,
  isConstantExpression,
  type Expression,
} from './parse-tree.js';
import { resolveColumn, type TableColumns, type TableRead } from './names.js';

/** Expressions that bound the timestamp column: ts >= max(lower), ts <= min(upper). */
export interface TimeBounds {
  lower: Expression[];
  upper: Expression[];
}

/**
 * Bounds on the table's timestamp column from the top-level AND of the WHERE of the SELECT
 * directly over a read; anything else is ignored (never pruned on). A bound counts only where
 * the column it compares resolves to the timestamp column itself, not to a struct field or a
 * column an alias list gave its name.
 */
export function timeBounds(where: Expression | null, read: TableRead, table: TableColumns): TimeBounds {
  const isColumn = (n: unknown): boolean => {
    const resolved = isColumnRef(n) ? resolveColumn(n, read, table.columns) : undefined;
    return resolved?.column === table.timestampColumn && resolved.fields.length === 0;
  };
  const bounds: TimeBounds = { lower: [], upper: [] };
  const conjuncts = (n: Expression | null): Expression[] =>
    !n ? [] : isConjunctionAnd(n) ? n.children.flatMap(conjuncts) : [n];
  for (const c of conjuncts(where)) {
    if (isBetween(c) && isColumn(c.input) && isConstantExpression(c.lower) && isConstantExpression(c.upper)) {
      bounds.lower.push(c.lower);
      bounds.upper.push(c.upper);
      continue;
    }
    if (!isComparison(c)) continue;
    const flipped: Record<string, string> = {
      COMPARE_GREATERTHAN: 'COMPARE_LESSTHAN',
      COMPARE_GREATERTHANOREQUALTO: 'COMPARE_LESSTHANOREQUALTO',
      COMPARE_LESSTHAN: 'COMPARE_GREATERTHAN',
      COMPARE_LESSTHANOREQUALTO: 'COMPARE_GREATERTHANOREQUALTO',
      COMPARE_EQUAL: 'COMPARE_EQUAL',
    };
    let op = c.type;
    let value: Expression;
    if (isColumn(c.left) && isConstantExpression(c.right)) value = c.right;
    else if (isColumn(c.right) && isConstantExpression(c.left)) {
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

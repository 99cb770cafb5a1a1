/**
 * The literals of a query that its plan takes as parameters, so that queries differing only in
 * them share one plan (a dashboard's refresh moves its time window; its panels differ by a
 * service or a threshold). Lifted: a string, INTEGER or BIGINT literal (or the text of a
 * `TIMESTAMP '…'`, a cast of a string, also within arithmetic:
 * `TIMESTAMP '…' - INTERVAL '1 day'`) that a WHERE compares (=, <>, <, <=, >, >=, BETWEEN, IN)
 * with something that is not a constant. A WHERE filters rows and names no output, so no such
 * value can change a plan's columns, types or stages; the time window it may bound is computed
 * again from each query's values. Every other literal (a LIMIT, ORDER BY 1, GROUP BY, a select
 * list, HAVING, a function's argument, a DECIMAL) stays part of the plan's key. A subquery's WHERE
 * is its own SELECT's, found in turn.
 */
import {
  isBetween,
  isCast,
  isComparison,
  isConstant,
  isConstantArithmetic,
  isConstantExpression,
  isSelectNode,
  isSubquery,
  walk,
  type AstNode,
  type Expression,
} from './parse-tree.js';

/** The field a lifted constant carries in the planner's tree: its parameter's name (written as `$name`). */
export const PARAMETER_FIELD = 'berth_parameter';

export type LiteralType = 'VARCHAR' | 'INTEGER' | 'BIGINT';

export interface Literal {
  name: string;
  type: LiteralType;
  /** The value as text (a BIGINT's digits, exactly). */
  value: string;
}

/**
 * The most literals a query has lifted: past it (a long IN list), it plans by its whole statement,
 * as a shape so long is not a dashboard's, and its values stay within what a scan request carries.
 */
export const MAX_LIFTED = 1_000;

const LIFTED_TYPES: ReadonlySet<string> = new Set(['VARCHAR', 'INTEGER', 'BIGINT']);
const COMPARISONS = new Set([
  'COMPARE_EQUAL',
  'COMPARE_NOTEQUAL',
  'COMPARE_LESSTHAN',
  'COMPARE_LESSTHANOREQUALTO',
  'COMPARE_GREATERTHAN',
  'COMPARE_GREATERTHANOREQUALTO',
]);

/**
 * Marks each liftable literal of `tree` (in place) with its parameter's name, `p1`, `p2`, … in
 * the order of a walk of the tree, the same for every query of one shape; returns their values.
 */
export function liftLiterals(tree: unknown): Literal[] {
  const literals: Literal[] = [];
  const lift = (operand: unknown, other: unknown): void => {
    if (isConstantExpression(other)) return;
    // Within arithmetic (`TIMESTAMP '…' - INTERVAL '1 day'`), only a string cast where it stands: the
    // cast types its parameter. A number stays in the key (INTERVAL 1 HOUR's is cast after trunc()).
    if (isConstantArithmetic(operand)) {
      for (const child of operand.children) {
        if (
          isConstantArithmetic(child) ||
          (isCast(child) && isConstant(child.child) && child.child.value.type.id === 'VARCHAR')
        )
          lift(child, other);
      }
      return;
    }
    const constant = isCast(operand) && isConstant(operand.child) ? operand.child : operand;
    if (!isConstant(constant) || constant.value.is_null || constant[PARAMETER_FIELD] !== undefined) return;
    const type = constant.value.type.id;
    // Of a cast, only a text's (TIMESTAMP '…', and a double, which parse-tree-json.ts writes as one).
    if (!LIFTED_TYPES.has(type) || (constant !== operand && type !== 'VARCHAR')) return;
    const name = `p${literals.length + 1}`;
    constant[PARAMETER_FIELD] = name;
    literals.push({ name, type: type as LiteralType, value: String(constant.value.value) });
  };
  const visitWhere = (n: unknown): void => {
    if (Array.isArray(n)) return n.forEach(visitWhere);
    if (n === null || typeof n !== 'object' || isSubquery(n)) return;
    const e = n as Expression;
    if (isComparison(e) && COMPARISONS.has(e.type)) {
      lift(e.left, e.right);
      lift(e.right, e.left);
    } else if (isBetween(e)) {
      lift(e.lower, e.input);
      lift(e.upper, e.input);
    } else if (e.class === 'OPERATOR' && (e.type === 'COMPARE_IN' || e.type === 'COMPARE_NOT_IN')) {
      const [input, ...list] = e.children as Expression[];
      for (const item of list) lift(item, input);
    }
    for (const value of Object.values(e)) visitWhere(value);
  };
  walk(tree, (n) => {
    if (isSelectNode(n)) visitWhere(n.where_clause);
  });
  if (literals.length <= MAX_LIFTED) return literals;
  forgetLiterals(tree);
  return [];
}

/**
 * `tree` with each lifted literal a parameter `$name`, as DuckDB's parse tree writes one; with
 * `typed`, the literal's type is kept in it too (for a plan's key: 5 and 5000000000 plan apart).
 */
export function parameterized(tree: unknown, typed = false): unknown {
  if (Array.isArray(tree)) return tree.map((t) => parameterized(t, typed));
  if (tree === null || typeof tree !== 'object') return tree;
  const node = tree as AstNode;
  const name = node[PARAMETER_FIELD];
  if (typeof name === 'string' && isConstant(node)) {
    return {
      class: 'PARAMETER',
      type: 'VALUE_PARAMETER',
      alias: node.alias,
      identifier: name,
      ...(typed ? { literal: node.value.type.id } : {}),
    };
  }
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, parameterized(value, typed)]));
}

/** Whether `tree` holds a lifted literal. */
export function hasLiterals(tree: unknown): boolean {
  let found = false;
  walk(tree, (n) => {
    if (n[PARAMETER_FIELD] !== undefined) found = true;
  });
  return found;
}

/** Unmarks every lifted literal of `tree` (in place): it plans with its literals as they are. */
export function forgetLiterals(tree: unknown): void {
  walk(tree, (n) => {
    delete n[PARAMETER_FIELD];
  });
}

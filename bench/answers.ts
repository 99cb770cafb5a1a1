/** How the benches check Berth's answers against one DuckDB's before they time anything. */
import type { QueryResult } from '../services/coordinator/client.js';

export type Answer = Pick<QueryResult, 'columns' | 'types' | 'rows'>;
/** Where two answers differ, in order (every query orders its rows fully); doubles to 1e-9 of their size. */
export function answerDifference(a: Answer, b: Answer): string | undefined {
  if (JSON.stringify([a.columns, a.types]) !== JSON.stringify([b.columns, b.types]))
    return `columns ${JSON.stringify([a.columns, a.types])} against ${JSON.stringify([b.columns, b.types])}`;
  if (a.rows.length !== b.rows.length) return `${a.rows.length} rows against ${b.rows.length}`;
  const same = (x: unknown, y: unknown) =>
    typeof x === 'number' && typeof y === 'number'
      ? Math.abs(x - y) <= 1e-9 * Math.max(Math.abs(x), Math.abs(y))
      : JSON.stringify(x) === JSON.stringify(y);
  const row = a.rows.findIndex((r, i) => r.some((cell, c) => !same(cell, b.rows[i]![c])));
  return row < 0 ? undefined : `row ${row}: ${JSON.stringify(a.rows[row])} against ${JSON.stringify(b.rows[row])}`;
}

/** Compares two JSON query results as a user would: same columns, same rows (in order where the query orders them). */
import { expect } from 'vitest';
import type { JsonResult, JsonValue } from '../../services/coordinator/result-json.js';

const RELATIVE_TOLERANCE = 1e-9;

/** Floating-point sums depend on summation order, in DuckDB itself too: compare doubles to 1e-9. */
function close(a: JsonValue, b: JsonValue): boolean {
  if (typeof a === 'number' && typeof b === 'number') return a === b || Math.abs(a - b) <= RELATIVE_TOLERANCE * Math.max(Math.abs(a), Math.abs(b));
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, i) => close(v, b[i]!));
  return JSON.stringify(a) === JSON.stringify(b);
}

const rowKey = (row: JsonValue[]) => JSON.stringify(row.map((v) => (typeof v === 'number' ? Number(v.toPrecision(8)) : v)));

export function expectSameResult(actual: Pick<JsonResult, 'columns' | 'rows'>, expected: Pick<JsonResult, 'columns' | 'rows'>, ordered: boolean, label: string): void {
  expect(actual.columns, `${label}: columns`).toEqual(expected.columns);
  expect(actual.rows.length, `${label}: row count`).toBe(expected.rows.length);
  const sort = (rows: JsonValue[][]) => (ordered ? rows : [...rows].sort((x, y) => rowKey(x).localeCompare(rowKey(y))));
  const [a, e] = [sort(actual.rows), sort(expected.rows)];
  for (let i = 0; i < a.length; i++) {
    if (!close(a[i]!, e[i]!)) {
      expect(a[i], `${label}: row ${i}`).toEqual(e[i]);
    }
  }
}

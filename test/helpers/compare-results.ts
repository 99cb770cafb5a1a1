/**
 * Compares two JSON query results as a user would: same columns with the same types, same rows (in
 * order where the query orders them). Only floating-point values get a tolerance: every other
 * value, big integers and decimals included, must be identical.
 */
import { expect } from 'vitest';
import type { JsonResult, JsonValue } from '../../services/common/final-stage/result-json.js';

const RELATIVE_TOLERANCE = 1e-9;
const FLOATING = /^(DOUBLE|FLOAT)$/;

/**
 * Floating-point sums depend on summation order, in DuckDB itself too: doubles compare to 1e-9 of
 * their size. A sum that cancels to about zero keeps the rounding of its addends instead (0 against
 * 7e-17), which only `absolute` forgives: a caller that knows its data's magnitudes passes it.
 */
function close(a: JsonValue, b: JsonValue, absolute: number): boolean {
  if (typeof a === 'number' && typeof b === 'number')
    return a === b || Math.abs(a - b) <= Math.max(RELATIVE_TOLERANCE * Math.max(Math.abs(a), Math.abs(b)), absolute);
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((v, i) => close(v, b[i]!, absolute));
  return JSON.stringify(a) === JSON.stringify(b);
}

const same = (a: JsonValue, b: JsonValue, type: string | undefined, absolute: number) =>
  type !== undefined && FLOATING.test(type) ? close(a, b, absolute) : JSON.stringify(a) === JSON.stringify(b);

/** A row's sort key: numbers to 8 digits, and those within `absolute` of zero as zero, so that close rows sort alike. */
const rowKey = (row: JsonValue[], absolute: number) =>
  JSON.stringify(
    row.map((v) => (typeof v === 'number' ? (Math.abs(v) <= absolute ? 0 : Number(v.toPrecision(8))) : v)),
  );

type Comparable = Pick<JsonResult, 'columns' | 'rows'> & Partial<Pick<JsonResult, 'types'>>;

/**
 * The first difference between two results, or undefined when they are the same. `absolute`: how
 * far from each other two doubles may be whatever their size (see close). @default 0
 */
export function resultDifference(
  actual: Comparable,
  expected: Comparable,
  ordered: boolean,
  absolute = 0,
): string | undefined {
  if (JSON.stringify(actual.columns) !== JSON.stringify(expected.columns))
    return `columns ${JSON.stringify(actual.columns)} != ${JSON.stringify(expected.columns)}`;
  if (expected.types && JSON.stringify(actual.types) !== JSON.stringify(expected.types))
    return `types ${JSON.stringify(actual.types)} != ${JSON.stringify(expected.types)}`;
  if (actual.rows.length !== expected.rows.length) return `${actual.rows.length} rows != ${expected.rows.length}`;
  const key = (row: JsonValue[]) => rowKey(row, absolute);
  const byKey = (rows: JsonValue[][]) => [...rows].sort((x, y) => key(x).localeCompare(key(y)));
  const sameRow = (x: JsonValue[], y: JsonValue[]) => x.every((v, c) => same(v, y[c]!, expected.types?.[c], absolute));
  // Two rows an ORDER BY tells apart only by a double's last digits (9.299999999999999 and 9.3, a
  // mean summed in another order) may come in either order: the first column they differ in is a
  // double, and the two values are close.
  const nearTie = (x: JsonValue[], y: JsonValue[]) => {
    const c = x.findIndex((v, i) => JSON.stringify(v) !== JSON.stringify(y[i]));
    return c >= 0 && FLOATING.test(expected.types?.[c] ?? '') && close(x[c]!, y[c]!, absolute);
  };
  const tiedRun = (rows: JsonValue[][], from: number) => {
    let to = from + 1;
    while (to < rows.length && nearTie(rows[to - 1]!, rows[to]!)) to++;
    return to;
  };
  const [a, e] = ordered ? [actual.rows, expected.rows] : [byKey(actual.rows), byKey(expected.rows)];
  for (let i = 0; i < a.length;) {
    if (sameRow(a[i]!, e[i]!)) {
      i++;
      continue;
    }
    const to = ordered ? Math.max(tiedRun(a, i), tiedRun(e, i)) : i + 1;
    const [x, y] = [byKey(a.slice(i, to)), byKey(e.slice(i, to))];
    if (to === i + 1 || !x.every((row, r) => sameRow(row, y[r]!)))
      return `row ${i}: ${JSON.stringify(a[i])} != ${JSON.stringify(e[i])}`;
    i = to;
  }
  return undefined;
}

export function expectSameResult(actual: Comparable, expected: Comparable, ordered: boolean, label: string): void {
  expect(resultDifference(actual, expected, ordered), label).toBeUndefined();
}

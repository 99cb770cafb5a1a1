/** A line chart (uPlot) of a result whose first column is a time: one line per numeric column. */
import uPlot from 'uplot';
import type { QueryResult } from './types.js';

const TIME_TYPE = /^(TIMESTAMP|DATE)/;
const NUMBER_TYPE =
  /^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|FLOAT|DOUBLE|DECIMAL)/;
const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2'];

/** DuckDB's JSON form of a time ("2026-10-24 00:00:00", "…+00", a date) in seconds since the epoch (UTC). */
export function secondsOf(value: unknown): number | null {
  if (typeof value !== 'string') return null;
  let text = value.replace(' ', 'T');
  if (/[+-]\d\d$/.test(text)) text += ':00';
  else if (text.includes('T') && !/(Z|[+-]\d\d:?\d\d)$/.test(text)) text += 'Z';
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? null : ms / 1000;
}

/** Whether the result can be drawn: a time first, then at least one number. */
export const chartable = (result: QueryResult) =>
  result.rows.length > 1 &&
  TIME_TYPE.test(result.types[0] ?? '') &&
  result.types.slice(1).some((t) => NUMBER_TYPE.test(t));

export function drawChart(target: HTMLElement, result: QueryResult): uPlot {
  const series = result.types.flatMap((type, i) => (i > 0 && NUMBER_TYPE.test(type) ? [i] : []));
  const rows = result.rows
    .map((row) => ({ x: secondsOf(row[0]), row }))
    .filter((r): r is { x: number; row: typeof r.row } => r.x !== null)
    .sort((a, b) => a.x - b.x);
  const data: uPlot.AlignedData = [
    rows.map((r) => r.x),
    ...series.map((i) => rows.map((r) => (r.row[i] === null ? null : Number(r.row[i])))),
  ];
  const width = Math.max(320, Math.min(target.clientWidth || 900, 1200));
  return new uPlot(
    {
      width,
      height: 300,
      title: `${series.map((i) => result.columns[i]).join(', ')} by ${result.columns[0]}`,
      series: [
        { label: result.columns[0] },
        ...series.map((i, n) => ({ label: result.columns[i], stroke: COLORS[n % COLORS.length], width: 2 })),
      ],
    },
    data,
    target,
  );
}

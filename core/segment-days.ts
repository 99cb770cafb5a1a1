/**
 * A table's active segments counted by the UTC day of their oldest row: how its data is spread
 * over time, for the console's chart. A segment whose oldest row is not a calendar instant (a
 * timeless table's, or -infinity) counts under `undated`.
 */

/** The span of instants a JavaScript Date (and so a calendar day) can hold. */
const MAX_DATE_MS = 8.64e15;

export interface SegmentDay {
  /** YYYY-MM-DD (UTC), or `undated`. */
  day: string;
  segments: number;
  rows: number;
  bytes: number;
}

export function segmentsByDay(segments: readonly { minTs: number; rows: number; bytes: number }[]): SegmentDay[] {
  const days = new Map<string, SegmentDay>();
  for (const s of segments) {
    const day = Math.abs(s.minTs) <= MAX_DATE_MS ? new Date(s.minTs).toISOString().slice(0, 10) : 'undated';
    const sum = days.get(day) ?? { day, segments: 0, rows: 0, bytes: 0 };
    sum.segments++;
    sum.rows += s.rows;
    sum.bytes += s.bytes;
    days.set(day, sum);
  }
  return [...days.values()].sort((a, b) => a.day.localeCompare(b.day));
}

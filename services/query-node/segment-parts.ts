/**
 * A segment held in part: its Parquet footer and the column chunks fetched so far, each at its own
 * offset in a sparse file of the object's full size, so that DuckDB opens it as the object itself.
 * DuckDB reads a Parquet file's footer, then only the chunks of the columns a query projects or
 * filters on; everything else it may touch (the magic bytes, bloom filters, page indexes) lies
 * outside the column chunks and is fetched with the first columns. So the holes, the chunks of
 * columns not fetched yet, are never read. A hole that were read would be zeros, which DuckDB
 * rejects as a page header: an error, never a wrong answer.
 *
 * This module is the bookkeeping: where each leaf column's chunks lie (from DuckDB's
 * parquet_metadata over the footer), which bytes are present, and which a query still needs.
 * The cache keeps it beside the file (`<id>.parquet.parts`); a file without one is whole.
 */
import type { DuckDBInstance } from '@duckdb/node-api';
import { sqlString, withConnection } from '../common/duckdb.js';

/** Bytes [start, end). */
export type Range = [start: number, end: number];

export interface SegmentParts {
  /** The object's size, and the file's apparent size. */
  size: number;
  /** Every leaf column chunk, in file order: its path in the schema ("s, x" for a struct's field x) and bytes. */
  chunks: { path: string; start: number; end: number }[];
  /** The bytes present, as sorted, disjoint, non-touching ranges. */
  have: Range[];
}

/** How far apart two ranges may be and still be fetched in one GET (the gap's bytes come along). */
export const COALESCE_GAP = 64 * 1024;

/** Where the column chunks of a Parquet file lie, read from its footer alone. */
export async function readChunks(duckdb: DuckDBInstance, file: string): Promise<SegmentParts['chunks']> {
  return await withConnection(duckdb, async (connection) => {
    const reader = await connection.runAndReadAll(
      `SELECT path_in_schema, data_page_offset, dictionary_page_offset, index_page_offset, total_compressed_size
         FROM parquet_metadata(${sqlString(file)}) ORDER BY row_group_id, column_id`,
    );
    return reader.getRowObjectsJson().map((row) => {
      const offsets = [row.data_page_offset, row.dictionary_page_offset, row.index_page_offset]
        .filter((o) => o !== null)
        .map(Number);
      const start = Math.min(...offsets);
      return { path: String(row.path_in_schema), start, end: start + Number(row.total_compressed_size) };
    });
  });
}

/**
 * The ranges still to fetch for a query that reads `mentions` (the strings DuckDB's plan names
 * its scans' columns with; undefined: every column): the chunks of each leaf column whose
 * top-level name occurs in one of them, and every byte outside the column chunks, less what is
 * present. Matching by occurrence errs towards fetching more, never less.
 */
export function missingRanges(parts: SegmentParts, mentions: readonly string[] | undefined): Range[] {
  const wanted: Range[] = [];
  const lowered = mentions?.map((m) => m.toLowerCase());
  for (const chunk of parts.chunks) {
    const top = topLevelName(chunk.path).toLowerCase();
    if (!lowered || lowered.some((m) => m.includes(top))) wanted.push([chunk.start, chunk.end]);
  }
  wanted.push(...subtract([[0, parts.size]], normalise(parts.chunks.map((c) => [c.start, c.end]))));
  return subtract(normalise(wanted), parts.have);
}

/** True when every byte of the file is present. */
export function isWhole(parts: SegmentParts): boolean {
  return parts.have.length === 1 && parts.have[0]![0] === 0 && parts.have[0]![1] === parts.size;
}

/** Ranges to GET for these: neighbours closer than `gap` merged. */
export function coalesce(ranges: readonly Range[], gap = COALESCE_GAP): Range[] {
  const out: Range[] = [];
  for (const [start, end] of normalise(ranges)) {
    const last = out.at(-1);
    if (last && start - last[1] <= gap) last[1] = Math.max(last[1], end);
    else out.push([start, end]);
  }
  return out;
}

/** Sorted, disjoint, non-touching ranges covering the same bytes; empty ranges dropped. */
export function normalise(ranges: readonly Range[]): Range[] {
  const sorted = ranges.filter(([s, e]) => e > s).sort((a, b) => a[0] - b[0]);
  const out: Range[] = [];
  for (const [start, end] of sorted) {
    const last = out.at(-1);
    if (last && start <= last[1]) last[1] = Math.max(last[1], end);
    else out.push([start, end]);
  }
  return out;
}

/** The bytes of `from` not in `minus` (both normalised). */
export function subtract(from: readonly Range[], minus: readonly Range[]): Range[] {
  const out: Range[] = [];
  for (const [start, end] of from) {
    let cursor = start;
    for (const [s, e] of minus) {
      if (e <= cursor || s >= end) continue;
      if (s > cursor) out.push([cursor, s]);
      cursor = Math.max(cursor, e);
      if (cursor >= end) break;
    }
    if (cursor < end) out.push([cursor, end]);
  }
  return out;
}

export const bytesIn = (ranges: readonly Range[]): number => ranges.reduce((sum, [s, e]) => sum + e - s, 0);

/** A leaf's top-level column: parquet_metadata joins a nested path with ", ". */
const topLevelName = (path: string): string => path.split(', ')[0]!;

/**
 * The guard between a segment and a scan: each column a scan reads that the segment holds must
 * have exactly the type its table declares, or the scan is refused. DuckDB reads a file by its
 * own schema, so a file whose column is DOUBLE where the table says HUGEINT would stream DOUBLEs
 * that the coordinator takes for HUGEINTs: bytes read as another type's, never an answer. A column
 * the segment lacks was added to the table after it was written (schema evolution): the scan reads
 * it as NULL there.
 *
 * A segment id names one immutable object, and a segment held in the memory tier is a table made
 * from its whole file: what a segment holds is read once (DESCRIBE, which reads only the footer, so
 * a file held in part will do) and remembered, and a warm scan only compares names and types.
 */
import type { DuckDBInstance } from '@duckdb/node-api';
import { LRUCache } from 'lru-cache';
import { sqlString, withConnection } from '../common/duckdb.js';
import { DomainError } from '../common/errors.js';
import { describe } from '../common/parquet-columns.js';
import type { SegmentShape } from '../common/scanner.js';
import type { ColumnSpec } from '../meta/client.js';
import { SEGMENT_SCHEMA_MISMATCH } from './api.js';

/** Where a segment's rows are read from: its file, or its table in the memory tier (a qualified SQL name). */
export type SegmentSource = { file: string } | { table: string };

/** A scan refused: a column of the segment has another type than its table declares. */
export class SegmentSchemaMismatch extends DomainError {
  constructor(
    readonly segment: string,
    readonly column: string,
    readonly declared: string,
    readonly found: string,
  ) {
    super(
      'inconsistent',
      SEGMENT_SCHEMA_MISMATCH,
      `segment ${segment} disagrees with its table: column "${column}" is declared ${declared} but the segment ` +
        `holds ${found}; the scan is refused rather than read as ${declared}`,
    );
  }
}

export class SegmentSchemas {
  /** Each segment's columns as DuckDB reads them: lower-cased name (DuckDB binds names so) to type. */
  private readonly known: LRUCache<string, Promise<Map<string, string>>>;

  constructor(
    private readonly duckdb: DuckDBInstance,
    /** Segments whose columns are remembered. @default 16384 */
    max = 16_384,
  ) {
    this.known = new LRUCache({ max });
  }

  /**
   * What the segment holds, and which of `columns` it lacks, to be read as NULL; throws a
   * SegmentSchemaMismatch when one it holds has another type than declared.
   */
  async check(segment: string, source: SegmentSource, columns: readonly ColumnSpec[]): Promise<SegmentShape> {
    const found = await this.columnsOf(segment, source);
    const lacking: string[] = [];
    for (const column of columns) {
      const type = found.get(column.name.toLowerCase());
      if (type === undefined) lacking.push(column.name);
      else if (type !== column.type) throw new SegmentSchemaMismatch(segment, column.name, column.type, type);
    }
    return { columns: JSON.stringify([...found.keys()]), lacking };
  }

  private columnsOf(segment: string, source: SegmentSource): Promise<Map<string, string>> {
    const known = this.known.get(segment);
    if (known) return known;
    const asked = this.describe(segment, source);
    this.known.set(segment, asked);
    // A file that could not be read is read again next time.
    asked.catch(() => {
      if (this.known.peek(segment) === asked) this.known.delete(segment);
    });
    return asked;
  }

  private async describe(segment: string, source: SegmentSource): Promise<Map<string, string>> {
    const relation = 'file' in source ? `read_parquet(${sqlString(source.file)})` : source.table;
    try {
      const columns = await withConnection(this.duckdb, (connection) => describe(connection, relation));
      return new Map(columns.map((column) => [column.name.toLowerCase(), column.type]));
    } catch (error) {
      throw new Error(`reading the schema of segment ${segment} failed`, { cause: error });
    }
  }
}

/**
 * A segment's columns as its Parquet file holds them, held against the table's: the file and
 * the table never disagree, so no scan ever reads one type's bytes as another's.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import type { ColumnSpec } from '../meta/client.js';
import { sqlString } from './duckdb.js';
import type { SegmentShape } from './scanner.js';

/** The columns of a relation (a table name, or `read_parquet('…')`) as DuckDB's DESCRIBE spells them. */
export async function describe(connection: DuckDBConnection, relation: string): Promise<ColumnSpec[]> {
  const reader = await connection.runAndReadAll(`DESCRIBE SELECT * FROM ${relation}`);
  return reader.getRows().map((row) => ({ name: String(row[0]), type: String(row[1]) }));
}

/** Per file, what it holds and which `declared` columns it lacks: added to the table after it was written (schema evolution). */
export async function segmentShapes(
  connection: DuckDBConnection,
  files: readonly string[],
  declared: readonly ColumnSpec[],
): Promise<Map<string, SegmentShape>> {
  const shapes = new Map<string, SegmentShape>();
  for (const file of files) {
    const held = (await describe(connection, `read_parquet(${sqlString(file)})`)).map((c) => c.name.toLowerCase());
    const names = new Set(held);
    shapes.set(file, {
      columns: JSON.stringify(held),
      lacking: declared.filter((c) => !names.has(c.name.toLowerCase())).map((c) => c.name),
    });
  }
  return shapes;
}

/** How `found` differs from `declared`, column by column, or undefined when they agree. */
export function columnsDisagree(found: readonly ColumnSpec[], declared: readonly ColumnSpec[]): string | undefined {
  const byName = new Map(found.map((column) => [column.name, column.type]));
  for (const column of declared) {
    const type = byName.get(column.name);
    if (type === undefined) return `column "${column.name}" is missing (declared ${column.type})`;
    if (type !== column.type) return `column "${column.name}" is ${type}, declared ${column.type}`;
  }
  const extra = found.find((column) => !declared.some((d) => d.name === column.name));
  return extra && `column "${extra.name}" (${extra.type}) is not declared`;
}

/**
 * Turns a batch of NDJSON rows into one sorted Parquet segment, with a DuckDB of its own whose
 * only directory is the ingest scratch directory: the query engine never sees a batch in flight,
 * and this engine never runs a user's SQL.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { DuckDBInstance } from '@duckdb/node-api';
import { MAX_COLUMN_NAME_LENGTH, quoteIdent } from '../../core/identifiers.js';
import { openSandboxedDuckDB, sqlString, withConnection } from '../common/duckdb.js';
import { badRequest } from '../common/errors.js';
import type { ColumnSpec } from '../meta/client.js';
import { checkRows } from './ndjson-rows.js';

export interface SegmentFile {
  rows: number;
  /** Epoch ms, floor of the earliest and ceiling of the latest timestamp. */
  minTs: number;
  maxTs: number;
  columns: ColumnSpec[];
}

/** What meta accepts for a table's schema. */
const MAX_COLUMNS = 2000;

export class SegmentWriter {
  private constructor(
    private readonly duckdb: DuckDBInstance,
    private readonly dir: string,
  ) {}

  /** `dir` is emptied: batches left by a previous run were never committed. */
  static async open(dir: string, options: { threads?: number; memoryLimit?: string } = {}): Promise<SegmentWriter> {
    await rm(dir, { recursive: true, force: true });
    await mkdir(path.join(dir, 'spill'), { recursive: true, mode: 0o700 });
    return new SegmentWriter(
      await openSandboxedDuckDB({ allowedDirectories: [dir], tempDirectory: path.join(dir, 'spill'), ...options }),
      dir,
    );
  }

  close(): void {
    this.duckdb.closeSync();
  }

  /** A scratch file path inside the writer's directory. */
  scratchFile(suffix: string): string {
    return path.join(this.dir, `${randomUUID()}${suffix}`);
  }

  /**
   * Reads newline-delimited JSON into one sorted Parquet segment. With `columns` every row must fit
   * that schema as it is; without, the schema is inferred from all the rows (the table's first
   * batch) and every row must fit it. The timestamp column becomes TIMESTAMP and may not be NULL.
   * Bad rows are a 400 that names the line and field, or quotes DuckDB.
   */
  async ndjsonToSegment(
    input: string,
    output: string,
    timestampColumn: string,
    columns?: ColumnSpec[],
  ): Promise<SegmentFile> {
    const ts = quoteIdent(timestampColumn);
    return await withConnection(this.duckdb, async (c) => {
      const read = async (sql: string) => {
        try {
          return await c.runAndReadAll(sql);
        } catch (error) {
          throw badRequest('invalid_rows', `the rows could not be read: ${(error as Error).message.split('\n')[0]}`);
        }
      };
      let schema = columns;
      if (!schema) {
        schema = (
          await read(
            `DESCRIBE SELECT * FROM read_json(${sqlString(input)}, format = 'newline_delimited', sample_size = -1)`,
          )
        )
          .getRows()
          .map((r) => ({ name: String(r[0]), type: String(r[1]) }));
        if (schema.length > MAX_COLUMNS)
          throw badRequest(
            'too_many_columns',
            `the rows have ${schema.length} fields; a table has at most ${MAX_COLUMNS} columns`,
          );
        const long = schema.find((col) => col.name.length > MAX_COLUMN_NAME_LENGTH);
        if (long)
          throw badRequest(
            'column_name_too_long',
            `field "${long.name.slice(0, 40)}…" is longer than ${MAX_COLUMN_NAME_LENGTH} characters`,
          );
      }
      if (!schema.some((col) => col.name === timestampColumn))
        throw badRequest(
          'missing_timestamp',
          `rows have no "${timestampColumn}" column (the table's timestamp column)`,
        );
      await checkRows(input, schema);
      const source = `read_json(${sqlString(input)}, format = 'newline_delimited', columns = {${schema.map((col) => `${sqlString(col.name)}: ${sqlString(col.type)}`).join(', ')}})`;
      await read(
        `CREATE TEMP TABLE segment_rows AS SELECT * REPLACE (CAST(${ts} AS TIMESTAMP) AS ${ts}) FROM ${source}`,
      );
      const [rows, nulls, minTs, maxTs] = (
        await c.runAndReadAll(
          `SELECT count(*), count(*) - count(${ts}), epoch_ms(min(${ts})), ceil(epoch_us(max(${ts})) / 1000) FROM segment_rows`,
        )
      )
        .getRows()[0]!
        .map((v) => (v === null ? null : Number(v)));
      if (!rows) throw badRequest('no_rows', 'the body holds no rows');
      if (nulls) throw badRequest('missing_timestamp', `${nulls} row(s) have no "${timestampColumn}" value`);
      await c.run(`COPY (SELECT * FROM segment_rows ORDER BY ${ts}) TO ${sqlString(output)} (FORMAT parquet)`);
      const written = (await c.runAndReadAll('DESCRIBE segment_rows'))
        .getRows()
        .map((r) => ({ name: String(r[0]), type: String(r[1]) }));
      return { rows: rows!, minTs: minTs!, maxTs: maxTs!, columns: written };
    });
  }
}

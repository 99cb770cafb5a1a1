/**
 * Turns a batch of NDJSON rows into one sorted Parquet segment, with a DuckDB of its own whose
 * only directory is the ingest scratch directory: the query engine never sees a batch in flight,
 * and this engine never runs a user's SQL.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { MAX_COLUMN_NAME_LENGTH, quoteIdent } from '../../../core/identifiers.js';
import { openSandboxedDuckDB, sqlString, withConnection } from '../../common/duckdb.js';
import { badRequest, DomainError } from '../../common/errors.js';
import { MAX_COLUMN_TYPE_LENGTH, MAX_COLUMNS } from '../../common/schemas.js';
import type { ColumnSpec } from '../../meta/client.js';
import { jsonReadType } from '../../../core/json-typing.js';
import { epochMsSql, TIMELESS } from '../../../core/time-bounds.js';
import { columnsDisagree, describe } from '../../common/parquet-columns.js';
import { checkRows, inferColumns, newColumns } from './ndjson-rows.js';
import { checkCasts, planTypedColumns, unreadable, type TypedPlan, type TypedSource } from './typed-rows.js';

export interface SegmentFile {
  rows: number;
  /** Epoch ms, floor of the earliest and ceiling of the latest timestamp (core/time-bounds.ts). */
  minTs: number;
  maxTs: number;
  columns: ColumnSpec[];
}

/** A 400 unless meta would accept `schema`: at most MAX_COLUMNS columns, no name or type too long. */
export function checkColumnLimits(schema: ColumnSpec[]): void {
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
  const wide = schema.find((col) => col.type.length > MAX_COLUMN_TYPE_LENGTH);
  if (wide)
    throw badRequest(
      'column_type_too_long',
      `field "${wide.name}" would be a column of type ${wide.type.slice(0, 60)}…, longer than the ${MAX_COLUMN_TYPE_LENGTH} characters a table's column type may have`,
    );
}

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

  /** Runs `work` on a connection of the writer's DuckDB, which reads only its own directory. */
  withDuckDB<T>(work: (c: DuckDBConnection) => Promise<T>): Promise<T> {
    return withConnection(this.duckdb, work);
  }

  /** A scratch file path inside the writer's directory. */
  scratchFile(suffix: string): string {
    return path.join(this.dir, `${randomUUID()}${suffix}`);
  }

  /**
   * Schema evolution, for a batch that brings fields a table's `columns` lack (ndjsonToSegment
   * threw a NewField): the columns to append, typed by the typing rule over the new fields alone,
   * every row checked to fit the widened schema. A batch that would not fit is a 400 here, before
   * meta adds anything.
   */
  async newColumns(input: string, columns: ColumnSpec[]): Promise<ColumnSpec[]> {
    const inferred = await newColumns(input, columns);
    if (inferred.length === 0) throw new Error('the batch was said to bring a new field, and brings none');
    // In DuckDB's spelling (STRUCT(x BIGINT), not STRUCT("x" BIGINT)), as a first batch's columns are: what a segment's file says.
    const nulls = inferred.map((col) => `CAST(NULL AS ${col.type}) AS ${quoteIdent(col.name)}`).join(', ');
    const added = await withConnection(this.duckdb, (c) => describe(c, `(SELECT ${nulls})`));
    const evolved = [...columns, ...added];
    checkColumnLimits(evolved);
    await checkRows(input, evolved);
    return added;
  }

  /**
   * Reads newline-delimited JSON into one sorted Parquet segment. With `columns` every row must fit
   * that schema as it is; without, the columns come from all the rows by the typing rule
   * (core/json-typing.ts: the table's first batch) and every row must fit them. The timestamp
   * column may not be NULL; without one (null) the segment spans all of time (TIMELESS) and keeps
   * the batch's order. Bad rows are a 400 that names the line and field, or quotes DuckDB.
   * The file written is read back: its columns are the table's, or nothing is returned.
   */
  async ndjsonToSegment(
    input: string,
    output: string,
    timestampColumn: string | null,
    columns?: ColumnSpec[],
  ): Promise<SegmentFile> {
    let schema = columns;
    if (!schema) {
      schema = await inferColumns(input, timestampColumn);
      checkColumnLimits(schema);
    }
    if (schema.length === 0 && (await holdsNoRows(input))) throw badRequest('no_rows', 'the body holds no rows');
    if (timestampColumn !== null && !schema.some((col) => col.name === timestampColumn))
      throw badRequest('missing_timestamp', `rows have no "${timestampColumn}" column (the table's timestamp column)`);
    await checkRows(input, schema);
    return await withConnection(this.duckdb, async (c) => {
      const read = async (sql: string) => {
        try {
          return await c.runAndReadAll(sql);
        } catch (error) {
          // DuckDB's reason, quoted after Berth's words, without the coordinator's scratch path.
          const reason = (error as Error).message.split('\n')[0]!.replaceAll(input, 'the body');
          throw badRequest('invalid_rows', `the rows could not be read: ${reason}`);
        }
      };
      const readAs = schema.map((col) => ({ ...col, readType: jsonReadType(col.type) }));
      const source = `read_json(${sqlString(input)}, format = 'newline_delimited', columns = {${readAs.map((col) => `${sqlString(col.name)}: ${sqlString(col.readType)}`).join(', ')}})`;
      const recast = readAs
        .filter((col) => col.readType !== col.type)
        .map((col) => `CAST(${quoteIdent(col.name)} AS ${col.type}) AS ${quoteIdent(col.name)}`);
      await read(
        `CREATE TEMP TABLE segment_rows AS SELECT * ${recast.length > 0 ? `REPLACE (${recast.join(', ')})` : ''} FROM ${source}`,
      );
      return await writeSegment(c, output, timestampColumn, columns);
    });
  }

  /**
   * How a CSV or Parquet batch's columns go into `table`'s (its first batch: none), checked
   * against what meta would accept; the columns it adds are meta's to add before it is written.
   */
  async planTyped(source: TypedSource, timestampColumn: string | null, table?: ColumnSpec[]): Promise<TypedPlan> {
    const { plan } = await withConnection(this.duckdb, (c) => planTypedColumns(c, source, timestampColumn, table));
    checkColumnLimits(plan.columns);
    return plan;
  }

  /**
   * Reads a CSV or Parquet batch into one sorted Parquet segment with `table`'s columns (which
   * hold every column of the batch: see planTyped), or, for a table's first batch, the batch's own.
   */
  async typedToSegment(
    source: TypedSource,
    output: string,
    timestampColumn: string | null,
    table?: ColumnSpec[],
  ): Promise<SegmentFile> {
    return await withConnection(this.duckdb, async (c) => {
      const { plan, sql } = await planTypedColumns(c, source, timestampColumn, table);
      if (plan.added.length > 0)
        throw new Error(`the batch brings columns the table lacks: ${plan.added.map((col) => col.name).join(', ')}`);
      checkColumnLimits(plan.columns);
      try {
        await checkCasts(c, sql, plan.casts);
        await c.run(`CREATE TEMP TABLE segment_rows AS SELECT ${plan.select.join(', ')} FROM ${sql}`);
      } catch (error) {
        if (error instanceof DomainError) throw error;
        throw unreadable(source, error as Error);
      }
      return await writeSegment(c, output, timestampColumn, table);
    });
  }
}

/**
 * Writes the rows of the temp table `segment_rows` as one Parquet segment sorted by the timestamp
 * column, and reads the file back: its columns are `declared` (the table's), or without them the
 * rows' own, or nothing is returned. The timestamp column may not be NULL.
 */
async function writeSegment(
  c: DuckDBConnection,
  output: string,
  timestampColumn: string | null,
  declared?: ColumnSpec[],
): Promise<SegmentFile> {
  const ts = timestampColumn === null ? undefined : quoteIdent(timestampColumn);
  const [rows, nulls, minTs, maxTs] = (
    await c.runAndReadAll(
      ts
        ? `SELECT count(*), count(*) - count(${ts}), ${epochMsSql(`min(${ts})`, 'floor')}, ${epochMsSql(`max(${ts})`, 'ceil')} FROM segment_rows`
        : `SELECT count(*), 0, ${TIMELESS.minTs}, ${TIMELESS.maxTs} FROM segment_rows`,
    )
  )
    .getRows()[0]!
    .map((v) => (v === null ? null : Number(v)));
  if (!rows) throw badRequest('no_rows', 'the body holds no rows');
  if (nulls) throw badRequest('missing_timestamp', `${nulls} row(s) have no "${timestampColumn}" value`);
  await c.run(
    `COPY (SELECT * FROM segment_rows ${ts ? `ORDER BY ${ts}` : ''}) TO ${sqlString(output)} (FORMAT parquet)`,
  );
  const written = await describe(c, 'segment_rows');
  const stored = await describe(c, `read_parquet(${sqlString(output)})`);
  const disagreement = columnsDisagree(stored, declared ?? written);
  if (disagreement) throw new Error(`the segment written for the batch disagrees with the table: ${disagreement}`);
  return { rows: rows!, minTs: minTs!, maxTs: maxTs!, columns: written };
}

/** Whether an NDJSON file is empty or only blank lines (a small one is read; a large one holds rows). */
async function holdsNoRows(file: string): Promise<boolean> {
  const { size } = await stat(file);
  return size === 0 || (size < 64 * 1024 && (await readFile(file, 'utf8')).trim() === '');
}

/**
 * The coordinator's own DuckDB: parses SQL into DuckDB's parse tree and back, binds queries against
 * table schemas (without data) to check them and learn their output columns, and finishes
 * scattered queries over the partial results the nodes return.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { DuckDBInstance } from '@duckdb/node-api';
import { quoteIdent } from '../../core/identifiers.js';
import { PARTIALS_TABLE, selectNode, type AstNode } from '../../core/query-plan.js';
import { openSandboxedDuckDB, sqlString, withConnection } from '../common/duckdb.js';
import { badRequest, HttpError } from '../common/errors.js';
import type { ColumnSpec } from '../meta/client.js';
import type { ExchangeColumn } from './planner.js';
import { bindTables, Scanner, type TableFiles } from '../query-node/scanner.js';
import { readParseTree, writeParseTree } from './parse-tree-json.js';
import { toJsonResult, type JsonResult } from './result-json.js';

export interface SegmentFile {
  rows: number;
  /** Epoch ms, floor of the earliest and ceiling of the latest timestamp. */
  minTs: number;
  maxTs: number;
  columns: ColumnSpec[];
}

export interface BoundColumn {
  name: string;
  type: string;
}

export class SqlEngine {
  private readonly scanner: Scanner;

  private constructor(
    private readonly duckdb: DuckDBInstance,
    private readonly scratchDir: string,
    readonly aggregateFunctions: ReadonlySet<string>,
  ) {
    this.scanner = new Scanner(duckdb, scratchDir);
  }

  static async open(scratchDir: string, threads?: number): Promise<SqlEngine> {
    await rm(scratchDir, { recursive: true, force: true });
    await mkdir(path.join(scratchDir, 'spill'), { recursive: true });
    const duckdb = await openSandboxedDuckDB({ allowedDirectories: [scratchDir], tempDirectory: path.join(scratchDir, 'spill'), threads });
    const names = await withConnection(duckdb, async (c) =>
      (await c.runAndReadAll(`SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE function_type = 'aggregate'`)).getRows().map((r) => String(r[0])),
    );
    return new SqlEngine(duckdb, scratchDir, new Set(names));
  }

  close(): void {
    this.duckdb.closeSync();
  }

  /** The statement's parse tree, every literal exact; a syntax error, or anything but one query, is a 400. */
  async parse(sql: string): Promise<AstNode> {
    if (sql.includes('\u0000')) throw badRequest('invalid_sql', 'the SQL contains a NUL character');
    const json = await this.scalar(`SELECT json_serialize_sql(${sqlString(sql)})`);
    const parsed = readParseTree(json) as { error: boolean; error_message?: string; statements?: { node: AstNode }[] };
    if (parsed.error) throw badRequest('invalid_sql', parsed.error_message ?? 'the SQL could not be parsed');
    if (parsed.statements?.length !== 1) throw badRequest('invalid_sql', 'send exactly one SELECT statement');
    return parsed.statements[0]!.node;
  }

  /** SQL text for a parse tree, literals written digit for digit. */
  async deparse(node: AstNode): Promise<string> {
    return await this.scalar(`SELECT json_deserialize_sql(${sqlString(writeParseTree({ error: false, statements: [{ node }] }))})`);
  }

  /** Binds `sql` against empty tables of the given schemas: its output columns, or DuckDB's error. */
  async describe(sql: string, tables: { name: string; columns: ColumnSpec[] }[]): Promise<BoundColumn[]> {
    return await withConnection(this.duckdb, async (c) => {
      await bindTables(c, tables.map((t) => ({ ...t, files: [] })));
      const reader = await c.runAndReadAll(`DESCRIBE ${sql}`);
      return reader.getRows().map((r) => ({ name: String(r[0]), type: String(r[1]) }));
    });
  }

  /** Evaluates constant expressions (time bounds) to epoch milliseconds. */
  async epochMillis(expressions: AstNode[]): Promise<number[]> {
    if (expressions.length === 0) return [];
    const select = await this.deparse(selectNode({ select_list: expressions.map((e, i) => ({ ...e, alias: `b${i}` })), from_table: { type: 'EMPTY', alias: '', sample: null } }));
    return await withConnection(this.duckdb, async (c) => {
      const reader = await c.runAndReadAll(`SELECT ${expressions.map((_, i) => `epoch_ms(CAST(b${i} AS TIMESTAMP))`).join(', ')} FROM (${select})`);
      return (reader.getRows()[0] ?? []).map((v) => Number(v));
    });
  }

  /** Runs `sql` over tables bound to local Parquet files (or empty), returning Parquet bytes: a node's scan, done here. */
  runToParquet(sql: string, tables: TableFiles[]): Promise<Buffer> {
    return this.scanner.run(sql, tables);
  }

  /** Runs the final query over the partial results, each a Parquet body from a node with the columns `exchange` describes. */
  async finish(finalSql: string, partials: Buffer[], exchange: ExchangeColumn[]): Promise<JsonResult> {
    const dir = path.join(this.scratchDir, `q-${randomUUID()}`);
    await mkdir(dir);
    try {
      const files = await Promise.all(
        partials.map(async (body, i) => {
          const file = path.join(dir, `p${i}.parquet`);
          await writeFile(file, body);
          return file;
        }),
      );
      return await withConnection(this.duckdb, async (c) => {
        const columns = exchange.map((col, i) => `${col.asText ? `CAST(c${i} AS ${col.type})` : `c${i}`} AS ${quoteIdent(col.name)}`);
        await c.run(`CREATE TEMP VIEW ${quoteIdent(PARTIALS_TABLE)} AS SELECT ${columns.join(', ')} FROM read_parquet([${files.map(sqlString).join(', ')}])`);
        return toJsonResult(await c.runAndReadAll(finalSql));
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  /** A scratch file path inside the engine's directory. */
  scratchFile(suffix: string): string {
    return path.join(this.scratchDir, `${randomUUID()}${suffix}`);
  }

  /**
   * Reads newline-delimited JSON into one sorted Parquet segment. With `columns` the rows must fit
   * that schema; without, the schema is inferred (the table's first batch). The timestamp column
   * becomes TIMESTAMP and may not be NULL. Bad rows are a 400 that quotes DuckDB.
   */
  async ndjsonToSegment(input: string, output: string, timestampColumn: string, columns?: ColumnSpec[]): Promise<SegmentFile> {
    const ts = quoteIdent(timestampColumn);
    return await withConnection(this.duckdb, async (c) => {
      const source = columns
        ? `read_json(${sqlString(input)}, format = 'newline_delimited', columns = {${columns.map((col) => `${sqlString(col.name)}: ${sqlString(col.type)}`).join(', ')}})`
        : `read_json(${sqlString(input)}, format = 'newline_delimited')`;
      try {
        await c.run(`CREATE TEMP TABLE raw_rows AS SELECT * FROM ${source}`);
        const described = (await c.runAndReadAll('DESCRIBE raw_rows')).getRows().map((r) => String(r[0]));
        if (!described.includes(timestampColumn)) throw badRequest('missing_timestamp', `rows have no "${timestampColumn}" column (the table's timestamp column)`);
        await c.run(`CREATE TEMP TABLE segment_rows AS SELECT * REPLACE (CAST(${ts} AS TIMESTAMP) AS ${ts}) FROM raw_rows`);
      } catch (error) {
        if (error instanceof HttpError) throw error;
        throw badRequest('invalid_rows', `the rows could not be read: ${(error as Error).message.split('\n')[0]}`);
      }
      const [rows, nulls, minTs, maxTs] = (
        await c.runAndReadAll(`SELECT count(*), count(*) - count(${ts}), epoch_ms(min(${ts})), ceil(epoch_us(max(${ts})) / 1000) FROM segment_rows`)
      ).getRows()[0]!.map((v) => (v === null ? null : Number(v)));
      if (!rows) throw badRequest('no_rows', 'the body holds no rows');
      if (nulls) throw badRequest('missing_timestamp', `${nulls} row(s) have no "${timestampColumn}" value`);
      await c.run(`COPY (SELECT * FROM segment_rows ORDER BY ${ts}) TO ${sqlString(output)} (FORMAT parquet)`);
      const schema = (await c.runAndReadAll('DESCRIBE segment_rows')).getRows().map((r) => ({ name: String(r[0]), type: String(r[1]) }));
      return { rows: rows!, minTs: minTs!, maxTs: maxTs!, columns: schema };
    });
  }

  private async scalar(sql: string): Promise<string> {
    return await withConnection(this.duckdb, async (c) => String((await c.runAndReadAll(sql)).getRows()[0]![0]));
  }
}

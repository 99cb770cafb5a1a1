/**
 * The coordinator's own DuckDB for queries: parses SQL into DuckDB's parse tree and back, binds
 * queries against table schemas (without data) to check them and learn their output columns, and
 * finishes scattered queries over the partial results the nodes return. Ingest has a DuckDB of its
 * own (segment-writer.ts): nothing a query runs can reach a batch in flight.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { DuckDBInstance } from '@duckdb/node-api';
import { quoteIdent } from '../../core/identifiers.js';
import { PARTIALS_TABLE, selectNode, type AstNode } from '../../core/query-plan.js';
import { openSandboxedDuckDB, queryError, sqlString, withConnection } from '../common/duckdb.js';
import { badRequest } from '../common/errors.js';
import type { ColumnSpec } from '../meta/client.js';
import type { ExchangeColumn } from './planner.js';
import { bindTables, Scanner, type TableFiles } from '../query-node/scanner.js';
import { readParseTree, writeParseTree } from './parse-tree-json.js';
import { readJsonResult, type JsonResult } from './result-json.js';

export interface SegmentFile {
  rows: number;
  /** Epoch ms, floor of the earliest and ceiling of the latest timestamp. */
  minTs: number;
  maxTs: number;
  columns: ColumnSpec[];
}

export interface RunOptions {
  /** Interrupts DuckDB mid-query. */
  signal?: AbortSignal;
  /** Largest result: past it, a 413. */
  maxBytes?: number;
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

  /** `scratchDir` holds partial results only: the engine runs users' SQL, so it can read nothing else. */
  static async open(scratchDir: string, options: { threads?: number; memoryLimit?: string } = {}): Promise<SqlEngine> {
    await rm(scratchDir, { recursive: true, force: true });
    await mkdir(path.join(scratchDir, 'spill'), { recursive: true, mode: 0o700 });
    const duckdb = await openSandboxedDuckDB({ allowedDirectories: [scratchDir], tempDirectory: path.join(scratchDir, 'spill'), ...options });
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
  runToParquet(sql: string, tables: TableFiles[], options: RunOptions = {}): Promise<Buffer> {
    return this.scanner.run(sql, tables, options);
  }

  /**
   * Runs the final query over the partial results, each a Parquet body from a node with the columns
   * `exchange` describes. DuckDB's errors about the query are 400s; a result past `maxBytes` a 413.
   */
  async finish(finalSql: string, partials: Buffer[], exchange: ExchangeColumn[], options: RunOptions = {}): Promise<JsonResult> {
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
        const interrupt = () => c.interrupt();
        options.signal?.addEventListener('abort', interrupt, { once: true });
        try {
          return await readJsonResult(await c.stream(finalSql), options.maxBytes);
        } catch (error) {
          options.signal?.throwIfAborted();
          throw queryError(error, [this.scratchDir]) ?? error;
        } finally {
          options.signal?.removeEventListener('abort', interrupt);
        }
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  private async scalar(sql: string): Promise<string> {
    return await withConnection(this.duckdb, async (c) => String((await c.runAndReadAll(sql)).getRows()[0]![0]));
  }
}

/**
 * The coordinator's own DuckDB: parses SQL into DuckDB's parse tree and back, binds queries against
 * table schemas (without data) to check them and learn their output columns, and finishes
 * scattered queries over the partial results the nodes return.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { DuckDBInstance } from '@duckdb/node-api';
import { quoteIdent } from '../../core/identifiers.js';
import { PARTIALS_TABLE, type AstNode } from '../../core/query-plan.js';
import { openSandboxedDuckDB, sqlString, withConnection } from '../common/duckdb.js';
import { badRequest } from '../common/errors.js';
import type { ColumnSpec } from '../meta/client.js';
import { bindTables, type TableFiles } from '../query-node/scanner.js';
import { toJsonResult, type JsonResult } from './result-json.js';

export interface BoundColumn {
  name: string;
  type: string;
}

export class SqlEngine {
  private constructor(
    private readonly duckdb: DuckDBInstance,
    private readonly scratchDir: string,
    readonly aggregateFunctions: ReadonlySet<string>,
  ) {}

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

  /** The statement's parse tree; a syntax error, or anything but one query, is a 400. */
  async parse(sql: string): Promise<AstNode> {
    const json = await this.scalar(`SELECT json_serialize_sql(${sqlString(sql)})`);
    const parsed = JSON.parse(json) as { error: boolean; error_message?: string; statements?: { node: AstNode }[] };
    if (parsed.error) throw badRequest('invalid_sql', parsed.error_message ?? 'the SQL could not be parsed');
    if (parsed.statements?.length !== 1) throw badRequest('invalid_sql', 'send exactly one SELECT statement');
    return parsed.statements[0]!.node;
  }

  /** SQL text for a parse tree. */
  async deparse(node: AstNode): Promise<string> {
    // Positions are optional, and the parser's "unknown" (2^64 - 1) does not survive a JS number.
    const json = JSON.stringify({ error: false, statements: [{ node }] }, (key, value: unknown) => (key === 'query_location' ? undefined : value));
    return await this.scalar(`SELECT json_deserialize_sql(${sqlString(json)})`);
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
    const select = await this.deparse(selectOf(expressions.map((e, i) => ({ ...e, alias: `b${i}` }))));
    return await withConnection(this.duckdb, async (c) => {
      const reader = await c.runAndReadAll(`SELECT ${expressions.map((_, i) => `epoch_ms(CAST(b${i} AS TIMESTAMP))`).join(', ')} FROM (${select})`);
      return (reader.getRows()[0] ?? []).map((v) => Number(v));
    });
  }

  /** Runs `sql` over tables bound to local Parquet files (or empty), returning Parquet bytes. */
  async runToParquet(sql: string, tables: TableFiles[]): Promise<Buffer> {
    const out = path.join(this.scratchDir, `local-${randomUUID()}.parquet`);
    try {
      await withConnection(this.duckdb, async (c) => {
        await bindTables(c, tables);
        await c.run(`COPY (${sql}) TO ${sqlString(out)} (FORMAT parquet)`);
      });
      return await readFile(out);
    } finally {
      await rm(out, { force: true });
    }
  }

  /** Runs the final query over the partial results, each a Parquet body from a node. */
  async finish(finalSql: string, partials: Buffer[]): Promise<JsonResult> {
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
        await c.run(`CREATE TEMP VIEW ${quoteIdent(PARTIALS_TABLE)} AS SELECT * FROM read_parquet([${files.map(sqlString).join(', ')}])`);
        return toJsonResult(await c.runAndReadAll(finalSql));
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  private async scalar(sql: string): Promise<string> {
    return await withConnection(this.duckdb, async (c) => String((await c.runAndReadAll(sql)).getRows()[0]![0]));
  }
}

/** A FROM-less SELECT of the given expressions, as a parse tree. */
function selectOf(expressions: AstNode[]): AstNode {
  return {
    type: 'SELECT_NODE',
    modifiers: [],
    cte_map: { map: [] },
    select_list: expressions,
    from_table: { type: 'EMPTY', alias: '', sample: null },
    where_clause: null,
    group_expressions: [],
    group_sets: [],
    aggregate_handling: 'STANDARD_HANDLING',
    having: null,
    sample: null,
    qualify: null,
  };
}

/**
 * The coordinator's own DuckDB for queries: parses SQL into DuckDB's parse tree and back, binds
 * queries against table schemas (without data) to check them and learn their output columns, and
 * runs the final stage of every query over the rows the scan stage streams in (an Exchange).
 * Ingest has a DuckDB of its own (segment-writer.ts): nothing a query runs can reach a batch in
 * flight.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { DuckDBConnection, DuckDBInstance, DuckDBType } from '@duckdb/node-api';
import { LRUCache } from 'lru-cache';
import { quoteIdent } from '../../core/identifiers.js';
import { selectNode, type AstNode } from '../../core/query-plan.js';
import { appendArrowStream } from '../common/arrow-exchange.js';
import { openSandboxedDuckDB, queryError, ResultCutShort, sqlString, withConnection } from '../common/duckdb.js';
import { badRequest } from '../common/errors.js';
import type { ColumnSpec } from '../meta/client.js';
import type { ExchangeColumn } from './planner.js';
import { bindTables } from '../common/scanner.js';
import { readParseTree, writeParseTree } from './parse-tree-json.js';
import { jsonChunks, readJsonResult, type JsonValue, type SizedJsonResult } from './result-json.js';

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

/** A final stage's rows, read as DuckDB makes them; close() when done with them, read or not. */
export interface StreamedRows {
  columns: string[];
  types: string[];
  rows: AsyncIterable<JsonValue[][]>;
  close(): void;
}

export interface BoundColumn {
  name: string;
  type: string;
}

/** One input of a final stage: the name the final SQL reads it by, and the columns the scan stage sends. */
export interface ExchangeInput {
  name: string;
  columns: ExchangeColumn[];
}

/**
 * Connections kept open for statements that leave nothing on their connection (no temp objects,
 * no settings): opening one costs about as much as a small statement. Work that creates temp
 * objects (binding, a final stage's views) takes a fresh connection instead.
 */
class ConnectionPool {
  private readonly idle: DuckDBConnection[] = [];

  constructor(
    private readonly duckdb: DuckDBInstance,
    private readonly maxIdle = 16,
  ) {}

  async use<T>(work: (c: DuckDBConnection) => Promise<T>): Promise<T> {
    const connection = this.idle.pop() ?? (await this.duckdb.connect());
    try {
      return await work(connection);
    } finally {
      if (this.idle.length < this.maxIdle) this.idle.push(connection);
      else connection.closeSync();
    }
  }

  close(): void {
    for (const c of this.idle.splice(0)) c.closeSync();
  }
}

export class SqlEngine {
  private readonly pool: ConnectionPool;
  private readonly exchangeTypes = new LRUCache<string, Promise<DuckDBType[]>>({ max: 1000 });

  private constructor(
    private readonly duckdb: DuckDBInstance,
    private readonly scratchDir: string,
    readonly aggregateFunctions: ReadonlySet<string>,
    /** Functions whose every overload gives the same value in every query (DuckDB's CONSISTENT stability). */
    readonly consistentFunctions: ReadonlySet<string>,
  ) {
    this.pool = new ConnectionPool(duckdb);
  }

  /** `scratchDir` holds partial results only: the engine runs users' SQL, so it can read nothing else. */
  static async open(scratchDir: string, options: { threads?: number; memoryLimit?: string } = {}): Promise<SqlEngine> {
    await rm(scratchDir, { recursive: true, force: true });
    await mkdir(path.join(scratchDir, 'spill'), { recursive: true, mode: 0o700 });
    const duckdb = await openSandboxedDuckDB({
      allowedDirectories: [scratchDir],
      tempDirectory: path.join(scratchDir, 'spill'),
      ...options,
    });
    const names = (sql: string) =>
      withConnection(duckdb, async (c) => new Set((await c.runAndReadAll(sql)).getRows().map((r) => String(r[0]))));
    const aggregates = await names(
      `SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE function_type = 'aggregate'`,
    );
    const consistent = await names(
      `SELECT lower(function_name) FROM duckdb_functions() GROUP BY 1 HAVING bool_and(coalesce(stability = 'CONSISTENT', false))`,
    );
    return new SqlEngine(duckdb, scratchDir, aggregates, consistent);
  }

  close(): void {
    this.pool.close();
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
    return await this.scalar(
      `SELECT json_deserialize_sql(${sqlString(writeParseTree({ error: false, statements: [{ node }] }))})`,
    );
  }

  /** Binds `sql` against empty tables of the given schemas: its output columns, or DuckDB's error. */
  async describe(sql: string, tables: { name: string; columns: ColumnSpec[] }[]): Promise<BoundColumn[]> {
    return await withConnection(this.duckdb, async (c) => {
      await bindTables(
        c,
        tables.map((t) => ({ name: t.name, schema: t.columns, files: [] })),
      );
      const reader = await c.runAndReadAll(`DESCRIBE ${sql}`);
      return reader.getRows().map((r) => ({ name: String(r[0]), type: String(r[1]) }));
    });
  }

  /** Evaluates constant expressions (time bounds) to epoch milliseconds. */
  async epochMillis(expressions: AstNode[]): Promise<number[]> {
    if (expressions.length === 0) return [];
    const select = await this.deparse(
      selectNode({
        select_list: expressions.map((e, i) => ({ ...e, alias: `b${i}` })),
        from_table: { type: 'EMPTY', alias: '', sample: null },
      }),
    );
    return await this.pool.use(async (c) => {
      const reader = await c.runAndReadAll(
        `SELECT ${expressions.map((_, i) => `epoch_ms(CAST(b${i} AS TIMESTAMP))`).join(', ')} FROM (${select})`,
      );
      return (reader.getRows()[0] ?? []).map((v) => Number(v));
    });
  }

  /** A place for one query's final stage: its inputs fill as the scan stage streams rows in. */
  async openExchange(inputs: ExchangeInput[]): Promise<Exchange> {
    const schema = `q_${randomUUID().replaceAll('-', '')}`;
    await this.pool.use((c) => c.run(`CREATE SCHEMA ${schema}`));
    return new Exchange(this.duckdb, this.pool, schema, inputs, [this.scratchDir], this.exchangeTypes);
  }

  private async scalar(sql: string): Promise<string> {
    return await this.pool.use(async (c) => String((await c.runAndReadAll(sql)).getRows()[0]![0]));
  }
}

/**
 * One query's final stage. Each stream the scan stage sends (one per node and input) is appended,
 * batch by batch as it arrives, into a table of its own in a schema of the query's own, so that a
 * stream cut short can be dropped whole and its work sent elsewhere; the final SQL then reads each
 * input as the union of its streams. DuckDB holds the rows (and spills them past its memory
 * limit), never JavaScript.
 */
export class Exchange {
  private readonly parts = new Map<string, string[]>();
  /** Streams being appended: close() waits for them, so that none writes into a dropped schema. */
  private readonly receiving = new Set<Promise<unknown>>();
  private counter = 0;

  constructor(
    private readonly duckdb: DuckDBInstance,
    private readonly pool: ConnectionPool,
    private readonly schema: string,
    private readonly inputs: ExchangeInput[],
    private readonly hide: readonly string[],
    /** DuckDB's types of each column list the exchange has carried, kept across queries: asking costs a statement. */
    private readonly types: LRUCache<string, Promise<DuckDBType[]>>,
  ) {
    for (const input of inputs) this.parts.set(input.name, []);
  }

  private input(name: string): ExchangeInput {
    const input = this.inputs.find((i) => i.name === name);
    if (!input) throw new Error(`no input "${name}" in this exchange`);
    return input;
  }

  /** The columns as they travel: a type the exchange cannot carry as it is travels as text. */
  private columnsSql(input: ExchangeInput): string {
    return input.columns.map((col, i) => `c${i} ${col.asText ? 'VARCHAR' : col.type}`).join(', ');
  }

  /** Appends one Arrow IPC stream to an input; resolves with its part (for discard) and its rows. */
  receive(name: string, body: Readable): Promise<{ part: string; rows: number }> {
    const receiving = this.append(name, body);
    const settled: Promise<boolean> = receiving.then(
      () => this.receiving.delete(settled),
      () => this.receiving.delete(settled),
    );
    this.receiving.add(settled);
    return receiving;
  }

  private async append(name: string, body: Readable): Promise<{ part: string; rows: number }> {
    const input = this.input(name);
    const part = `p${this.counter++}`;
    try {
      return await this.pool.use(async (c) => {
        const columns = this.columnsSql(input);
        await c.run(`CREATE TABLE ${this.schema}.${part} (${columns})`);
        this.parts.get(name)!.push(part);
        let types = this.types.get(columns);
        if (!types) {
          types = c.runAndReadAll(`SELECT * FROM ${this.schema}.${part} LIMIT 0`).then((r) => r.columnTypes());
          const asked = types;
          asked.catch(() => this.types.delete(columns)); // awaited below; a failure is asked again next time
          this.types.set(columns, asked);
        }
        const appender = await c.createAppender(part, this.schema);
        try {
          const rows = await appendArrowStream(body, appender, await types);
          appender.flushSync();
          return { part, rows };
        } finally {
          appender.closeSync();
        }
      });
    } catch (error) {
      body.destroy();
      await this.discard(name, part);
      throw error;
    }
  }

  /** Drops what a stream cut short had appended: its work is done again elsewhere. */
  async discard(name: string, part: string): Promise<void> {
    const parts = this.parts.get(name)!;
    if (parts.includes(part)) parts.splice(parts.indexOf(part), 1);
    await this.pool.use((c) => c.run(`DROP TABLE IF EXISTS ${this.schema}.${part}`));
  }

  /** Runs the final SQL over the inputs. DuckDB's errors about the query are 400s; a result past `maxBytes` a 413. */
  async finish(finalSql: string, options: RunOptions = {}): Promise<SizedJsonResult> {
    return await withConnection(this.duckdb, async (c) => {
      await this.bindInputs(c);
      return await this.run(c, options.signal, async () => {
        try {
          return await readJsonResult(await c.stream(finalSql), options.maxBytes);
        } catch (error) {
          if (!(error instanceof ResultCutShort)) throw error;
          throw await this.reasonFor(c, finalSql, error, options.signal);
        }
      });
    });
  }

  /**
   * Runs the final SQL over the inputs and hands its rows over as the reader takes them, one DuckDB
   * chunk at a time: DuckDB computes no further ahead than the reader reads. Errors found before
   * the first row (DuckDB's about the query: 400s) reject; later ones end `rows` with the error.
   */
  async stream(finalSql: string, signal?: AbortSignal): Promise<StreamedRows> {
    const c = await this.duckdb.connect();
    let open = true;
    const close = () => {
      if (open) c.closeSync();
      open = false;
    };
    try {
      await this.bindInputs(c);
      const result = await this.run(c, signal, () => c.stream(finalSql));
      const rows = this.rowsOf(c, jsonChunks(result), signal, finalSql);
      return { columns: result.columnNames(), types: result.columnTypes().map(String), rows, close };
    } catch (error) {
      close();
      throw error;
    }
  }

  /** `chunks`, each read under `signal` with DuckDB's errors made 400s. */
  private async *rowsOf(
    c: DuckDBConnection,
    chunks: AsyncGenerator<JsonValue[][]>,
    signal: AbortSignal | undefined,
    finalSql: string,
  ): AsyncGenerator<JsonValue[][]> {
    try {
      for (let next = await this.run(c, signal, () => chunks.next()); !next.done;) {
        yield next.value;
        next = await this.run(c, signal, () => chunks.next());
      }
    } catch (error) {
      if (!(error instanceof ResultCutShort)) throw error;
      throw await this.reasonFor(c, finalSql, error, signal);
    }
  }

  /**
   * What to throw for a final stage DuckDB cut short (duckdb.ts, resultChunks): its reason, from
   * the query run again as EXPLAIN ANALYZE (the same error, none of the rows kept), as a 400 where
   * it is the query's fault; the cut itself when the run goes through this time.
   */
  private async reasonFor(
    c: DuckDBConnection,
    finalSql: string,
    cut: ResultCutShort,
    signal: AbortSignal | undefined,
  ): Promise<unknown> {
    signal?.throwIfAborted(); // interrupted: there is no reason to look for
    try {
      await this.run(c, signal, () => c.run(`EXPLAIN ANALYZE ${finalSql}`));
      return cut;
    } catch (reason) {
      return reason;
    }
  }

  /** Names each input by the union of its streams, as views on this connection. */
  private async bindInputs(c: DuckDBConnection): Promise<void> {
    for (const input of this.inputs) {
      const parts = this.parts.get(input.name)!;
      const columns = input.columns.map(
        (col, i) => `${col.asText ? `CAST(c${i} AS ${col.type})` : `c${i}`} AS ${quoteIdent(col.name)}`,
      );
      let source: string;
      if (parts.length > 0) source = parts.map((p) => `SELECT * FROM ${this.schema}.${p}`).join(' UNION ALL ');
      else {
        await c.run(`CREATE TEMP TABLE ${quoteIdent(`${input.name}_empty`)} (${this.columnsSql(input)})`);
        source = `SELECT * FROM ${quoteIdent(`${input.name}_empty`)}`;
      }
      await c.run(`CREATE TEMP VIEW ${quoteIdent(input.name)} AS SELECT ${columns.join(', ')} FROM (${source})`);
    }
  }

  /** Runs a step of the final stage: `signal` interrupts DuckDB, and DuckDB's errors about the query become 400s. */
  private async run<T>(c: DuckDBConnection, signal: AbortSignal | undefined, step: () => Promise<T>): Promise<T> {
    signal?.throwIfAborted(); // a listener added now would never hear an abort already past
    const interrupt = () => c.interrupt();
    signal?.addEventListener('abort', interrupt, { once: true });
    try {
      return await step();
    } catch (error) {
      signal?.throwIfAborted();
      throw queryError(error, this.hide) ?? error;
    } finally {
      signal?.removeEventListener('abort', interrupt);
    }
  }

  /** Drops every row the query received, once no stream is still being appended (their scans were stopped). */
  async close(): Promise<void> {
    await Promise.all(this.receiving);
    await this.pool.use((c) => c.run(`DROP SCHEMA IF EXISTS ${this.schema} CASCADE`));
  }
}

/**
 * Runs one scan-stage query with DuckDB over local segment files and hands back its result as a
 * stream of DuckDB chunks, read as the coordinator takes them (services/common/arrow-exchange.ts
 * turns them into Arrow IPC). Nothing is written to disk.
 */
import path from 'node:path';
import type { DuckDBConnection, DuckDBInstance, DuckDBPreparedStatement, DuckDBResult } from '@duckdb/node-api';
import { LRUCache } from 'lru-cache';
import { quoteIdent } from '../../core/identifiers.js';
import { interruptOnAbort, queryError, sqlString } from './duckdb.js';
import type { ColumnSpec } from '../meta/client.js';
import { parquetScanMentions } from './scan-columns.js';
import { bindParameters, runWith, streamWith, type SqlParameter } from './sql-parameters.js';

export interface TableFiles {
  name: string;
  /** The table's schema, for an empty table when no segment is left after pruning. */
  schema: ColumnSpec[];
  /** The columns the scan reads; the view over the files has only these. @default every column */
  columns?: string[];
  files: string[];
  /** Segments held as DuckDB tables (their qualified names), read with the files. */
  inMemory?: string[];
  /** Per file or held table, what it holds (schema evolution: older segments lack newer columns). */
  shapes?: ReadonlyMap<string, SegmentShape>;
}

/** What one segment holds against the table's columns. */
export interface SegmentShape {
  /** Its own column names, in its order: files that hold the same are read as one list. */
  columns: string;
  /** The columns the scan reads that it lacks (added to the table after it was written): read as NULL. */
  lacking: readonly string[];
}

/** The columns a scan of `table` reads: a scan that reads none (count(*)) still needs one for its rows, the cheapest any. */
export function scannedColumns(table: Pick<TableFiles, 'schema' | 'columns'>): ColumnSpec[] {
  const wanted = table.columns && new Set(table.columns.map((c) => c.toLowerCase()));
  const read = wanted ? table.schema.filter((c) => wanted.has(c.name.toLowerCase())) : table.schema;
  return read.length > 0 ? read : table.schema.slice(0, 1);
}

const isEmpty = (table: TableFiles): boolean => table.files.length === 0 && !table.inMemory?.length;

const nullAs = (column: ColumnSpec): string => `CAST(NULL AS ${column.type}) AS ${quoteIdent(column.name)}`;

/**
 * What `table` is for one statement: its files and held tables (only the columns the scan reads,
 * named, in the table's order), in one UNION ALL; or no rows of its schema. Files that hold the
 * same columns are read as one list, so that DuckDB never reads a list of files whose columns
 * differ (a segment written before a column was added, or after the scan's schema was read); a
 * column one lacks is read as NULL.
 */
export function segmentsSql(table: TableFiles): string {
  const schema = scannedColumns(table);
  if (isEmpty(table)) return `SELECT ${schema.map(nullAs).join(', ')} LIMIT 0`;
  const whole: SegmentShape = { columns: '', lacking: [] };
  const shapeOf = (source: string) => table.shapes?.get(source) ?? whole;
  const select = ({ lacking }: SegmentShape) =>
    schema.map((c) => (lacking.includes(c.name) ? nullAs(c) : quoteIdent(c.name))).join(', ');
  const groups = new Map<string, { shape: SegmentShape; files: string[] }>();
  for (const file of table.files) {
    const shape = shapeOf(file);
    const group = groups.get(shape.columns);
    if (group) group.files.push(file);
    else groups.set(shape.columns, { shape, files: [file] });
  }
  return [
    ...[...groups.values()].map(
      ({ shape, files }) => `SELECT ${select(shape)} FROM read_parquet([${files.map(sqlString).join(', ')}])`,
    ),
    ...(table.inMemory ?? []).map((held) => `SELECT ${select(shapeOf(held))} FROM ${held}`),
  ].join(' UNION ALL ');
}

/**
 * `sql` with each table named in a WITH clause of its own: nothing is created on the connection
 * (a temp view made and dropped per scan costs DuckDB two catalog writes, about a sixth of a small
 * scan). Undefined when `sql` has a WITH clause of its own to merge with.
 */
export function withTables(sql: string, tables: TableFiles[]): string | undefined {
  if (/^\s*with\b/i.test(sql)) return undefined;
  return `WITH ${tables.map((t) => `${quoteIdent(t.name)} AS (${segmentsSql(t)})`).join(', ')} ${sql}`;
}

/** Makes each table name a view over its files (only the columns a scan reads), on one connection (temp views are per connection). */
export async function bindTables(
  connection: { run(sql: string): Promise<unknown> },
  tables: TableFiles[],
): Promise<void> {
  for (const table of tables) {
    if (isEmpty(table)) {
      const schema = scannedColumns(table);
      await connection.run(
        `CREATE TEMP TABLE ${quoteIdent(table.name)} (${schema.map((c) => `${quoteIdent(c.name)} ${c.type}`).join(', ')})`,
      );
    } else {
      await connection.run(`CREATE TEMP VIEW ${quoteIdent(table.name)} AS ${segmentsSql(table)}`);
    }
  }
}

/** A scan's result, read chunk by chunk; close() when done with it, read or not. */
export interface OpenScan {
  result: DuckDBResult;
  /** `ended`: the result was read to its end (its connection serves the next scan); else the connection closes. */
  close(ended: boolean): void;
}

/** Drops the temp objects bindTables made, leaving the connection as it was. */
const unbindSql = (tables: TableFiles[]): string =>
  tables.map((t) => `DROP ${isEmpty(t) ? 'TABLE' : 'VIEW'} IF EXISTS ${quoteIdent(t.name)};`).join(' ');

export class Scanner {
  /**
   * Connections with nothing left on them, kept for the next scan: opening one waits on the
   * instance's lock on the event loop (over a millisecond while other scans run), a scan's own
   * fixed cost. A scan takes one, binds its tables, and drops them again before giving it back.
   */
  private readonly idle: DuckDBConnection[] = [];
  /**
   * Each connection's statements over held tables alone, prepared once: parsing, binding and
   * planning are over a third of DuckDB's work in a small scan of tables in memory. Statements
   * that read files are not kept (DuckDB keeps what it learnt of the files in their plans). A
   * kept statement does not keep a dropped table's rows, and DuckDB binds it again when the
   * catalog changed.
   */
  private readonly prepared = new WeakMap<DuckDBConnection, LRUCache<string, DuckDBPreparedStatement>>();
  private closed = false;

  constructor(
    private readonly duckdb: DuckDBInstance,
    private readonly maxIdle = 16,
    private readonly maxPrepared = 64,
  ) {}

  /**
   * What `sql` reads from the tables' files, for fetching segments in part; undefined: everything.
   * The plan's scans (scan-columns.ts), and every column the coordinator named: a filter that the
   * files' statistics make always true is gone from the plan, yet DuckDB still reads its column.
   */
  async columnsRead(
    sql: string,
    tables: TableFiles[],
    parameters: readonly SqlParameter[] = [],
  ): Promise<string[] | undefined> {
    const connection = await this.take();
    let reusable = true;
    try {
      await bindTables(connection, tables);
      const mentions = await parquetScanMentions(connection, sql, parameters);
      return mentions && [...mentions, ...tables.flatMap((t) => t.columns ?? t.schema.map((c) => c.name))];
    } catch (error) {
      reusable = false; // what it left bound is unknown
      throw error;
    } finally {
      this.giveBack(connection, tables, reusable);
    }
  }

  /**
   * Starts `sql` over the tables' files. DuckDB's errors about the query are 400s; `signal`
   * interrupts DuckDB mid-query (the client left, or its deadline passed).
   */
  async open(
    sql: string,
    tables: TableFiles[],
    signal?: AbortSignal,
    parameters: readonly SqlParameter[] = [],
  ): Promise<OpenScan> {
    signal?.throwIfAborted();
    const connection = await this.take();
    const stopInterrupting = interruptOnAbort(connection, signal);
    const statement = withTables(sql, tables);
    const bound = statement === undefined ? tables : [];
    let closed = false;
    const close = (reusable: boolean) => {
      if (closed) return;
      closed = true;
      stopInterrupting();
      // An interrupted connection is not given back: nothing of that query may reach the next.
      this.giveBack(connection, bound, reusable && !signal?.aborted);
    };
    try {
      await bindTables(connection, bound);
      const inMemory = statement !== undefined && tables.every((t) => t.files.length === 0);
      let result: DuckDBResult;
      if (inMemory) {
        const prepared = await this.prepare(connection, statement);
        bindParameters(prepared, parameters);
        result = await prepared.stream();
      } else result = await streamWith(connection, statement ?? sql, parameters);
      return { result, close };
    } catch (error) {
      close(false);
      signal?.throwIfAborted();
      throw this.explain(error, tables);
    }
  }

  /** Connections kept for the next scan. */
  get idleConnections(): number {
    return this.idle.length;
  }

  /** Closes the idle connections (the instance closes after). */
  close(): void {
    this.closed = true;
    for (const connection of this.idle.splice(0)) connection.closeSync();
  }

  private async prepare(connection: DuckDBConnection, statement: string): Promise<DuckDBPreparedStatement> {
    let kept = this.prepared.get(connection);
    if (!kept) {
      kept = new LRUCache({ max: this.maxPrepared, dispose: (prepared) => prepared.destroySync() });
      this.prepared.set(connection, kept);
    }
    let prepared = kept.get(statement);
    if (!prepared) kept.set(statement, (prepared = await connection.prepare(statement)));
    return prepared;
  }

  private async take(): Promise<DuckDBConnection> {
    return this.idle.pop() ?? (await this.duckdb.connect());
  }

  /** Unbinds the tables and keeps the connection for the next scan; closes it when it is not `reusable` or the unbinding fails. */
  private giveBack(connection: DuckDBConnection, tables: TableFiles[], reusable: boolean): void {
    const keep = () => reusable && !this.closed && this.idle.length < this.maxIdle;
    if (!keep()) return connection.closeSync();
    if (tables.length === 0) return void this.idle.push(connection);
    connection.run(unbindSql(tables)).then(
      () => (keep() ? this.idle.push(connection) : connection.closeSync()),
      () => connection.closeSync(),
    );
  }

  /**
   * Why `sql` fails: a streamed result DuckDB cut short does not say why (duckdb.ts,
   * resultChunks), so it runs again as EXPLAIN ANALYZE, which meets the same error and keeps none
   * of the rows. The error, or undefined when it runs through this time; `signal` interrupts it.
   */
  async reason(
    sql: string,
    tables: TableFiles[],
    signal?: AbortSignal,
    parameters: readonly SqlParameter[] = [],
  ): Promise<unknown> {
    const connection = await this.take();
    const stopInterrupting = interruptOnAbort(connection, signal);
    let failure: unknown;
    try {
      signal?.throwIfAborted();
      await bindTables(connection, tables);
      await runWith(connection, `EXPLAIN ANALYZE ${sql}`, parameters);
    } catch (error) {
      failure = error;
    } finally {
      stopInterrupting();
      this.giveBack(connection, tables, failure === undefined);
    }
    return failure;
  }

  /** A DuckDB error as the answer to give: the query's own fault (a 400 without the node's directories), or as it is. */
  explain(error: unknown, tables: TableFiles[]): unknown {
    return (
      queryError(
        error,
        tables.flatMap((t) => t.files.map((f) => path.dirname(f))),
      ) ?? error
    );
  }
}

export type { DuckDBConnection };

/**
 * Runs one scan-stage query with DuckDB over local segment files and hands back its result as a
 * stream of DuckDB chunks, read as the coordinator takes them (services/common/arrow-exchange.ts
 * turns them into Arrow IPC). Nothing is written to disk.
 */
import path from 'node:path';
import type { DuckDBConnection, DuckDBInstance, DuckDBResult } from '@duckdb/node-api';
import { quoteIdent } from '../../core/identifiers.js';
import { queryError, sqlString, withConnection } from './duckdb.js';
import type { ColumnSpec } from '../meta/client.js';
import { parquetScanMentions } from './scan-columns.js';

export interface TableFiles {
  name: string;
  /** The table's schema, for an empty table when no segment is left after pruning. */
  schema: ColumnSpec[];
  /** The columns the scan reads; the view over the files has only these. @default every column */
  columns?: string[];
  files: string[];
}

/** Makes each table name a view over its files (only the columns a scan reads), on one connection (temp views are per connection). */
export async function bindTables(connection: { run(sql: string): Promise<unknown> }, tables: TableFiles[]): Promise<void> {
  for (const table of tables) {
    const wanted = table.columns && new Set(table.columns.map((c) => c.toLowerCase()));
    // A scan that reads no column (count(*)) still needs one for its rows: the cheapest is any.
    const read = wanted ? table.schema.filter((c) => wanted.has(c.name.toLowerCase())) : table.schema;
    const schema = read.length > 0 ? read : table.schema.slice(0, 1);
    if (table.files.length === 0) {
      await connection.run(`CREATE TEMP TABLE ${quoteIdent(table.name)} (${schema.map((c) => `${quoteIdent(c.name)} ${c.type}`).join(', ')})`);
    } else {
      const select = schema.length === table.schema.length ? '*' : schema.map((c) => quoteIdent(c.name)).join(', ');
      await connection.run(`CREATE TEMP VIEW ${quoteIdent(table.name)} AS SELECT ${select} FROM read_parquet([${table.files.map(sqlString).join(', ')}])`);
    }
  }
}

/** A scan's result, read chunk by chunk; close() when done with it, read or not. */
export interface OpenScan {
  result: DuckDBResult;
  close(): void;
}

export class Scanner {
  constructor(private readonly duckdb: DuckDBInstance) {}

  /** What `sql` reads from the tables' files (scan-columns.ts), for fetching segments in part; undefined: everything. */
  async columnsRead(sql: string, tables: TableFiles[]): Promise<string[] | undefined> {
    return await withConnection(this.duckdb, async (connection) => {
      await bindTables(connection, tables);
      return await parquetScanMentions(connection, sql);
    });
  }

  /**
   * Starts `sql` over the tables' files. DuckDB's errors about the query are 400s; `signal`
   * interrupts DuckDB mid-query (the client left, or its deadline passed).
   */
  async open(sql: string, tables: TableFiles[], signal?: AbortSignal): Promise<OpenScan> {
    signal?.throwIfAborted();
    const connection = await this.duckdb.connect();
    const interrupt = () => connection.interrupt();
    signal?.addEventListener('abort', interrupt, { once: true });
    const close = () => {
      signal?.removeEventListener('abort', interrupt);
      connection.closeSync();
    };
    try {
      await bindTables(connection, tables);
      return { result: await connection.stream(sql), close };
    } catch (error) {
      close();
      signal?.throwIfAborted();
      throw this.explain(error, tables);
    }
  }

  /** A DuckDB error as the answer to give: the query's own fault (a 400 without the node's directories), or as it is. */
  explain(error: unknown, tables: TableFiles[]): unknown {
    return queryError(error, tables.flatMap((t) => t.files.map((f) => path.dirname(f)))) ?? error;
  }
}

export type { DuckDBConnection };

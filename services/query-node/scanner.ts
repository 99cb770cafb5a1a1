/**
 * Runs one plan fragment with DuckDB over local segment files and returns its result as Parquet
 * bytes, which keep every column type exact on the way to the coordinator.
 */
import { randomUUID } from 'node:crypto';
import { readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { DuckDBInstance } from '@duckdb/node-api';
import { quoteIdent } from '../../core/identifiers.js';
import { queryError, sqlString, withConnection } from '../common/duckdb.js';
import { resultTooLarge } from '../common/errors.js';
import type { ColumnSpec } from '../meta/client.js';

export interface TableFiles {
  name: string;
  /** The table's schema, for an empty view when no segment is left after pruning. */
  columns: ColumnSpec[];
  files: string[];
}

/** Makes each table name a view over its files, on one connection (temp views are per connection). */
export async function bindTables(connection: { run(sql: string): Promise<unknown> }, tables: TableFiles[]): Promise<void> {
  for (const table of tables) {
    if (table.files.length === 0) {
      const columns = table.columns.map((c) => `${quoteIdent(c.name)} ${c.type}`).join(', ');
      await connection.run(`CREATE TEMP TABLE ${quoteIdent(table.name)} (${columns})`);
    } else {
      await connection.run(`CREATE TEMP VIEW ${quoteIdent(table.name)} AS SELECT * FROM read_parquet([${table.files.map(sqlString).join(', ')}])`);
    }
  }
}

export class Scanner {
  constructor(
    private readonly duckdb: DuckDBInstance,
    /** Scratch directory for results, inside the engine's allowed directories. */
    private readonly scratchDir: string,
  ) {}

  /**
   * Runs `sql` and returns its result as Parquet. `signal` interrupts DuckDB mid-query (the client
   * left, or its deadline passed); a result past `maxBytes` is a 413 and is never read into memory.
   */
  async run(sql: string, tables: TableFiles[], options: { signal?: AbortSignal; maxBytes?: number } = {}): Promise<Buffer> {
    const { signal, maxBytes = Infinity } = options;
    const out = path.join(this.scratchDir, `scan-${randomUUID()}.parquet`);
    try {
      await withConnection(this.duckdb, async (connection) => {
        signal?.throwIfAborted();
        const interrupt = () => connection.interrupt();
        signal?.addEventListener('abort', interrupt, { once: true });
        try {
          await bindTables(connection, tables);
          await connection.run(`COPY (${sql}) TO ${sqlString(out)} (FORMAT parquet)`);
        } catch (error) {
          signal?.throwIfAborted();
          throw queryError(error, [this.scratchDir, ...tables.flatMap((t) => t.files.map((f) => path.dirname(f)))]) ?? error;
        } finally {
          signal?.removeEventListener('abort', interrupt);
        }
      });
      if ((await stat(out)).size > maxBytes) throw resultTooLarge(maxBytes);
      return await readFile(out);
    } finally {
      await rm(out, { force: true });
    }
  }
}

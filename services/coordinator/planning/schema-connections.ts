/**
 * Connections holding empty tables of given schemas, for binding queries against them (DESCRIBE,
 * PREPARE) without data. Opening a connection waits on the instance's lock, and creating a wide
 * temp table is a catalog write: together they cost a plan more than the binds they serve, several
 * times over per plan. So a connection is kept, tables and all, for the next bind over exactly the
 * same tables: it holds no other name, so a name the query should not see still fails to bind.
 */
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { bindTables } from '../../common/scanner.js';
import type { ColumnSpec } from '../../meta/client.js';

export interface EmptyTable {
  name: string;
  columns: ColumnSpec[];
}

/** Idle connections kept, over every set of tables. */
const MAX_IDLE = 16;

export class SchemaConnections {
  /** Oldest first; a binding takes the newest over its tables. */
  private readonly idle: { key: string; connection: DuckDBConnection }[] = [];
  private closed = false;

  constructor(private readonly duckdb: DuckDBInstance) {}

  /** Runs `work` on a connection holding exactly `tables`, empty; binds only: it must leave nothing behind. */
  async use<T>(tables: readonly EmptyTable[], work: (c: DuckDBConnection) => Promise<T>): Promise<T> {
    const key = JSON.stringify(tables.map((t) => [t.name, t.columns.map((c) => [c.name, c.type])]));
    const at = this.idle.findLastIndex((i) => i.key === key);
    let connection = at >= 0 ? this.idle.splice(at, 1)[0]!.connection : undefined;
    if (!connection) {
      connection = await this.duckdb.connect();
      try {
        await bindTables(
          connection,
          tables.map((t) => ({ name: t.name, schema: t.columns, files: [] })),
        );
      } catch (error) {
        connection.closeSync();
        throw error;
      }
    }
    try {
      return await work(connection);
    } finally {
      this.giveBack(key, connection);
    }
  }

  close(): void {
    this.closed = true;
    for (const { connection } of this.idle.splice(0)) connection.closeSync();
  }

  private giveBack(key: string, connection: DuckDBConnection): void {
    if (this.closed) return connection.closeSync();
    this.idle.push({ key, connection });
    if (this.idle.length > MAX_IDLE) this.idle.shift()!.connection.closeSync();
  }
}

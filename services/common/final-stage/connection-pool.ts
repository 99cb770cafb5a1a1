/** The DuckDB connections that the binder's statements and the final stages take turns on. */
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';

/**
 * Connections kept open for statements that leave nothing on their connection (no temp objects,
 * no settings): opening one costs about as much as a small statement. Work that creates temp
 * objects takes a fresh connection instead.
 */
export class ConnectionPool {
  private readonly idle: DuckDBConnection[] = [];

  constructor(
    private readonly duckdb: DuckDBInstance,
    private readonly maxIdle = 16,
  ) {}

  async take(): Promise<DuckDBConnection> {
    return this.idle.pop() ?? (await this.duckdb.connect());
  }

  /** Keeps the connection for the next statement; closes it when it is not `reusable` (interrupted, or a result left open). */
  giveBack(connection: DuckDBConnection, reusable = true): void {
    if (reusable && this.idle.length < this.maxIdle) this.idle.push(connection);
    else connection.closeSync();
  }

  async use<T>(work: (c: DuckDBConnection) => Promise<T>): Promise<T> {
    const connection = await this.take();
    try {
      return await work(connection);
    } finally {
      this.giveBack(connection);
    }
  }

  close(): void {
    for (const c of this.idle.splice(0)) c.closeSync();
  }
}

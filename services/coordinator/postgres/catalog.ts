/**
 * Answers clients' catalog questions (psql's \dt and \d, JDBC's DatabaseMetaData, BI tools'
 * pickers, version(), current_database()) from Berth's own catalog: a DuckDB of its own, in memory
 * and cut off from files and settings, whose pg_catalog and information_schema tables
 * (catalog-schema.ts) list Berth's tables and columns and nothing else. It holds no table data:
 * a statement that reads both the catalog and Berth's tables is refused, never answered empty.
 *
 * DuckDB's built-in pg_catalog cannot be extended and answers none of psql's own queries; an
 * embedded PostgreSQL (PGlite) answers them all but takes seconds and hundreds of MB to start.
 */
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import type { TableInfo } from '../../meta/client.js';
import { readJsonResult, type JsonResult } from '../../common/final-stage/result-json.js';
import { interruptOnAbort } from '../../common/duckdb.js';
import { CATALOG_OIDS, CATALOG_SCHEMA, FIRST_TABLE_OID } from './catalog-schema.js';
import { pgColumnType } from './pg-types.js';
import { catalogDialect } from './sql-text.js';

/** How long the catalog's copy of Berth's table list is used before it is read again. */
const REFRESH_MS = 1_000;

const q = (s: string) => `'${s.replace(/'/g, "''")}'`;

export class PgCatalog {
  private refreshed = 0;
  private refreshing?: Promise<void>;

  private constructor(
    private readonly duckdb: DuckDBInstance,
    private readonly listTables: () => Promise<TableInfo[]>,
    private readonly serverVersion: string,
  ) {}

  static async open(listTables: () => Promise<TableInfo[]>, serverVersion: string): Promise<PgCatalog> {
    const duckdb = await DuckDBInstance.create(':memory:', {
      threads: '1',
      memory_limit: '64MB',
      autoinstall_known_extensions: 'false',
      autoload_known_extensions: 'false',
    });
    const c = await duckdb.connect();
    try {
      await c.run('CREATE SCHEMA pgcat');
      await c.run('SET search_path = pgcat');
      for (const statement of CATALOG_SCHEMA) await c.run(statement);
      await c.run(`CREATE MACRO version() AS ${q(`PostgreSQL ${serverVersion} (Berth)`)}`);
      await c.run('SET enable_external_access = false');
      await c.run('SET lock_configuration = true');
    } finally {
      c.closeSync();
    }
    return new PgCatalog(duckdb, listTables, serverVersion);
  }

  close(): void {
    this.duckdb.closeSync();
  }

  /**
   * Runs a catalog statement, its `$n` parameters bound by DuckDB as values; `signal` interrupts
   * it. Its types come from the catalog's own columns.
   */
  async run(sql: string, parameters: (string | null)[], signal: AbortSignal): Promise<JsonResult> {
    await this.refresh();
    const c = await this.duckdb.connect();
    const stopInterrupting = interruptOnAbort(c, signal);
    try {
      await c.run('SET search_path = pgcat');
      const prepared = await c.prepare(catalogDialect(sql));
      parameters.forEach((value, i) => {
        if (value === null) prepared.bindNull(i + 1);
        else prepared.bindVarchar(i + 1, value);
      });
      return await readJsonResult(await prepared.stream());
    } finally {
      stopInterrupting();
      c.closeSync();
    }
  }

  /** The output columns of a catalog statement, without running it. */
  async describe(sql: string): Promise<{ name: string; type: string }[]> {
    await this.refresh();
    const c = await this.duckdb.connect();
    try {
      await c.run('SET search_path = pgcat');
      const prepared = await c.prepare(catalogDialect(sql));
      return Array.from({ length: prepared.columnCount }, (_, i) => ({
        name: prepared.columnName(i),
        type: String(prepared.columnType(i)),
      }));
    } finally {
      c.closeSync();
    }
  }

  private async refresh(): Promise<void> {
    if (Date.now() - this.refreshed < REFRESH_MS) return;
    this.refreshing ??= this.load().finally(() => (this.refreshing = undefined));
    await this.refreshing;
  }

  /** Berth's tables into pg_class, pg_attribute and information_schema, in one transaction. */
  private async load(): Promise<void> {
    const tables = [...(await this.listTables())].sort((a, b) => a.name.localeCompare(b.name));
    const c = await this.duckdb.connect();
    try {
      await c.run('SET search_path = pgcat');
      await c.run('BEGIN');
      for (const table of ['pg_class', 'pg_attribute', 'tables', 'columns']) await c.run(`DELETE FROM ${table}`);
      for (const [i, table] of tables.entries()) await this.insertTable(c, table, FIRST_TABLE_OID + i);
      await c.run('COMMIT');
      this.refreshed = Date.now();
    } catch (error) {
      await c.run('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      c.closeSync();
    }
  }

  private async insertTable(c: DuckDBConnection, table: TableInfo, oid: number): Promise<void> {
    const n = table.columns.length;
    await c.run(
      `INSERT INTO pg_class VALUES (${oid}, ${q(table.name)}, ${CATALOG_OIDS.public}, 0, 0, 10, ${CATALOG_OIDS.heap},
       ${oid}, 0, 0, -1, 0, 0, false, false, 'p', 'r', ${n}, 0, false, false, false, false, false, true, 'd', false,
       0, 0, 0, NULL, NULL, NULL)`,
    );
    await c.run(
      `INSERT INTO tables VALUES ('berth', 'public', ${q(table.name)}, 'BASE TABLE', NULL, NULL, NULL, NULL, NULL, 'NO', 'NO', NULL)`,
    );
    for (const [i, column] of table.columns.entries()) {
      const type = pgColumnType(column.type);
      const [display] = (
        await c.runAndReadAll(
          `SELECT format_type(${type.oid}, ${type.modifier}), typname FROM berth_types WHERE oid = ${type.oid}`,
        )
      ).getRows();
      const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(column.type);
      await c.run(
        `INSERT INTO pg_attribute VALUES (${oid}, ${q(column.name)}, ${type.oid}, -1, ${type.size}, ${i + 1}, 0, -1,
         ${type.modifier}, false, 'i', 'p', '', false, false, false, '', '', false, true, 0, 0, NULL, NULL, NULL, NULL)`,
      );
      await c.run(
        `INSERT INTO columns VALUES ('berth', 'public', ${q(table.name)}, ${q(column.name)}, ${i + 1}, NULL, 'YES',
         ${q(String(display?.[0] ?? 'text'))}, NULL, NULL, ${decimal ? decimal[1] : 'NULL'}, ${decimal ? 10 : 'NULL'},
         ${decimal ? decimal[2] : 'NULL'}, NULL, 'berth', 'pg_catalog', ${q(String(display?.[1] ?? 'text'))}, 'NO')`,
      );
    }
  }

  get version(): string {
    return this.serverVersion;
  }
}

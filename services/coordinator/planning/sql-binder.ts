/**
 * The planner's DuckDB: parses SQL into DuckDB's parse tree and back, binds queries against table
 * schemas (without data) to check them and learn their output columns, and evaluates time bounds.
 * It runs on the coordinator's DuckDB for queries (sql-engine.ts), which the final stages share,
 * and knows nothing of them.
 */
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { epochMsSql } from '../../../core/time-bounds.js';
import { hasLiterals, parameterized } from '../../../core/query-plan/literals.js';
import { selectNode, type AstNode, type QueryNode } from '../../../core/query-plan/parse-tree.js';
import type { TimeBounds } from '../../../core/query-plan/time-window.js';
import { sqlString, withConnection } from '../../common/duckdb.js';
import { badRequest } from '../../common/errors.js';
import type { ColumnSpec } from '../../meta/client.js';
import { streamWith, type SqlParameter } from '../../common/sql-parameters.js';
import type { BoundColumn, TimeWindow, WindowSql } from '../stages.js';
import { readParseTree, writeParseTree } from './parse-tree-json.js';
import { SchemaConnections } from './schema-connections.js';

/** What DuckDB reads as space before or after a statement: ASCII's and the Unicode spaces between tokens. */
const EDGE_SPACES =
  /^[ \t\n\r\f\v\u00a0\u2000-\u200b\u202f\u205f\u3000\ufeff]+|[ \t\n\r\f\v\u00a0\u2000-\u200b\u202f\u205f\u3000\ufeff]+$/g;

/**
 * A statement without the spaces around it. DuckDB's own query path drops them; its
 * json_serialize_sql and DESCRIBE fail on an edge U+000B, or a trailing U+00A0 that does not parse
 * as part of a name ("syntax error at or near " ""), where the query itself runs. Not for a
 * statement DuckDB reads with its final U+00A0 (see SqlBinder.statement).
 */
const withoutEdgeSpaces = (sql: string): string => sql.replace(EDGE_SPACES, '');

/** Connections kept open for statements that leave nothing on their connection (the engine's pool). */
export interface PooledConnections {
  use<T>(work: (c: DuckDBConnection) => Promise<T>): Promise<T>;
}

/** What the planner needs to know of DuckDB's functions. */
export interface FunctionNames {
  aggregateFunctions: ReadonlySet<string>;
  /** Functions whose every overload gives the same value in every query (DuckDB's CONSISTENT stability). */
  consistentFunctions: ReadonlySet<string>;
}

/** SQL the planner checked with the query's literals, and the same with them as parameters, over `tables`. */
export interface TemplateCheck {
  sql: string;
  template: string;
  tables: { name: string; columns: ColumnSpec[] }[];
}

export class SqlBinder implements FunctionNames {
  readonly aggregateFunctions: ReadonlySet<string>;
  readonly consistentFunctions: ReadonlySet<string>;
  private readonly schemas: SchemaConnections;

  constructor(
    protected readonly duckdb: DuckDBInstance,
    private readonly pooled: PooledConnections,
    functions: FunctionNames,
  ) {
    this.aggregateFunctions = functions.aggregateFunctions;
    this.consistentFunctions = functions.consistentFunctions;
    this.schemas = new SchemaConnections(duckdb);
  }

  /** The names of DuckDB's aggregate functions and of its consistent ones, lower-cased. */
  static async functionNames(duckdb: DuckDBInstance): Promise<FunctionNames> {
    const names = (sql: string) =>
      withConnection(duckdb, async (c) => new Set((await c.runAndReadAll(sql)).getRows().map((r) => String(r[0]))));
    const aggregateFunctions = await names(
      `SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE function_type = 'aggregate'`,
    );
    const consistentFunctions = await names(
      `SELECT lower(function_name) FROM duckdb_functions() GROUP BY 1 HAVING bool_and(coalesce(stability = 'CONSISTENT', false))`,
    );
    return { aggregateFunctions, consistentFunctions };
  }

  /**
   * The statement as DuckDB's query path reads it. DuckDB reads the Unicode spaces as spaces
   * everywhere but in a statement's last two bytes: a final U+00A0 belongs to the name before it
   * (`ORDER BY k\u00a0` looks for "k\u00a0", `SELECT 1 AS k\u00a0` names its column so), and only
   * a statement that does not parse that way runs as if it were not there.
   */
  async statement(sql: string): Promise<{ sql: string; node: QueryNode }> {
    if (sql.includes('\u0000')) throw badRequest('invalid_sql', 'the SQL contains a NUL character');
    let text = withoutEdgeSpaces(sql);
    let parsed = sql.endsWith('\u00a0') ? await this.serialize(sql) : undefined;
    if (parsed && !parsed.error) text = sql;
    else parsed = await this.serialize(text);
    if (parsed.error) throw badRequest('invalid_sql', parsed.error_message ?? 'the SQL could not be parsed');
    if (parsed.statements?.length !== 1) throw badRequest('invalid_sql', 'send exactly one SELECT statement');
    return { sql: text, node: parsed.statements[0]!.node };
  }

  /** The statement's parse tree, every literal exact; a syntax error, or anything but one query, is a 400. */
  async parse(sql: string): Promise<QueryNode> {
    return (await this.statement(sql)).node;
  }

  private async serialize(sql: string) {
    return readParseTree(await this.scalar(`SELECT json_serialize_sql(${sqlString(sql)})`)) as {
      error: boolean;
      error_message?: string;
      statements?: { node: QueryNode }[];
    };
  }

  /** SQL text for a parse tree, literals written digit for digit. */
  async deparse(node: QueryNode): Promise<string> {
    return await this.scalar(
      `SELECT json_deserialize_sql(${sqlString(writeParseTree({ error: false, statements: [{ node }] }))})`,
    );
  }

  /** Binds `sql` against empty tables of the given schemas: its output columns, or DuckDB's error. */
  async describe(sql: string, tables: { name: string; columns: ColumnSpec[] }[]): Promise<BoundColumn[]> {
    return await this.schemas.use(tables, async (c) => {
      const reader = await c.runAndReadAll(`DESCRIBE ${sql}`);
      return reader.getRows().map((r) => ({ name: String(r[0]), type: String(r[1]) }));
    });
  }

  /**
   * Whether each template binds to the same columns and types as its SQL (over empty tables of
   * the given schemas): DuckDB must tell every parameter's type from what it is compared with.
   */
  async sameColumns(checks: readonly TemplateCheck[]): Promise<boolean> {
    // Destroyed at once: the connection serves the next plan, and a prepared statement lives on it.
    const types = async (c: DuckDBConnection, sql: string) => {
      const p = await c.prepare(sql);
      try {
        return Array.from({ length: p.columnCount }, (_, i) => `${p.columnName(i)} ${p.columnType(i).toString()}`);
      } finally {
        p.destroySync();
      }
    };
    for (const { sql, template, tables } of checks) {
      if (template === sql) continue;
      const same = await this.schemas
        .use(tables, async (c) => {
          const [a, b] = [await types(c, sql), await types(c, template)];
          return a.length === b.length && a.every((t, i) => t === b[i]);
        })
        .catch(() => false);
      if (!same) return false;
    }
    return true;
  }

  /**
   * A query giving the bounds as epoch milliseconds, the lower ones first, as SQL and as the
   * template a cached plan keeps (lifted literals as parameters); undefined without bounds.
   */
  async boundsSql(bounds: TimeBounds): Promise<WindowSql | undefined> {
    const expressions = [...bounds.lower, ...bounds.upper];
    if (expressions.length === 0) return undefined;
    const select = selectNode({
      select_list: expressions.map((e, i) => ({ ...e, alias: `b${i}` })),
      from_table: { type: 'EMPTY', alias: '', sample: null },
    });
    const { sql, template } = await this.deparseBoth(select);
    const epochs = expressions.map((_, i) => epochMsSql(`TRY_CAST(b${i} AS TIMESTAMP)`, 'floor')).join(', ');
    return {
      sql: `SELECT ${epochs} FROM (${sql})`,
      template: `SELECT ${epochs} FROM (${template})`,
      lower: bounds.lower.length,
    };
  }

  /**
   * The window a bounds query gives (run with `parameters` when it has them). A bound that is NULL,
   * or that DuckDB cannot read as a timestamp, bounds nothing; a query that fails prunes nothing.
   */
  async window(sql: string, lower: number, parameters: readonly SqlParameter[] = []): Promise<TimeWindow> {
    const row = await this.pooled
      .use(async (c) => (await (await streamWith(c, sql, parameters)).getRows())[0] ?? [])
      .catch(() => []);
    const epochs = (values: unknown[]) => values.filter((v) => v !== null && v !== undefined).map(Number);
    const from = epochs(row.slice(0, lower));
    const to = epochs(row.slice(lower));
    return {
      from: from.length > 0 ? Math.max(...from) : undefined,
      to: to.length > 0 ? Math.min(...to) : undefined,
    };
  }

  /**
   * SQL text for a tree with lifted literals, twice: with the literals (to bind and describe) and
   * with them as parameters (what a cached plan runs); one round trip.
   */
  async deparseBoth(node: AstNode): Promise<{ sql: string; template: string }> {
    if (!hasLiterals(node)) {
      const sql = await this.deparse(node as QueryNode);
      return { sql, template: sql };
    }
    const json = (tree: unknown) => sqlString(writeParseTree({ error: false, statements: [{ node: tree }] }));
    return await this.pooled.use(async (c) => {
      const [sql, template] = (
        await c.runAndReadAll(
          `SELECT json_deserialize_sql(${json(node)}), json_deserialize_sql(${json(parameterized(node))})`,
        )
      ).getRows()[0]!;
      return { sql: String(sql), template: String(template) };
    });
  }

  /** Closes the connections kept for binding; the instance is its owner's to close. */
  protected closeBindings(): void {
    this.schemas.close();
  }

  private async scalar(sql: string): Promise<string> {
    return await this.pooled.use(async (c) => String((await c.runAndReadAll(sql)).getRows()[0]![0]));
  }
}

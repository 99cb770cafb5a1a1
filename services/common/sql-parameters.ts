/**
 * The literals a query's plan takes as parameters (coordinator/planning/plan-cache.ts): a cached
 * plan's SQL names them `$p1`, `$p2`, …, and every DuckDB that runs part of it (the owners' scans,
 * the final stage) binds this query's values into a prepared statement, never into the text.
 */
import { Type } from 'typebox';
import type { DuckDBConnection, DuckDBPreparedStatement, DuckDBResult } from '@duckdb/node-api';

/** The literal kinds lifted: a string (also the text of a TIMESTAMP '…'), and SQL's integer literals. */
export type ParameterType = 'VARCHAR' | 'INTEGER' | 'BIGINT';

export interface SqlParameter {
  /** As the SQL names it, without the `$`. */
  name: string;
  type: ParameterType;
  /** The literal's value as text (a BIGINT's digits, exactly). */
  value: string;
}

/** A statement's parameters on the wire. */
export const SqlParameters = Type.Array(
  Type.Object({
    name: Type.String({ pattern: '^p[0-9]{1,5}$' }),
    type: Type.Union([Type.Literal('VARCHAR'), Type.Literal('INTEGER'), Type.Literal('BIGINT')]),
    value: Type.String({ maxLength: 1 << 20 }),
  }),
  { maxItems: 10_000 },
);

/**
 * Binds each parameter `prepared` names, by the literal's own type (DuckDB casts it to what the
 * statement compares it with, as it would the literal). A statement may name only some of the
 * query's parameters: the owners' scan has the WHERE, the final stage perhaps not.
 */
export function bindParameters(prepared: DuckDBPreparedStatement, parameters: readonly SqlParameter[]): void {
  const byName = new Map(parameters.map((p) => [p.name, p]));
  for (let i = 1; i <= prepared.parameterCount; i++) {
    const name = prepared.parameterName(i);
    const parameter = byName.get(name);
    if (!parameter) throw new Error(`no value for the parameter $${name}`);
    if (parameter.type === 'VARCHAR') prepared.bindVarchar(i, parameter.value);
    else if (parameter.type === 'INTEGER') prepared.bindInteger(i, Number(parameter.value));
    else prepared.bindBigInt(i, BigInt(parameter.value));
  }
}

/** Runs `sql` on `connection` to the end, prepared and bound when it has parameters. */
export async function runWith(
  connection: DuckDBConnection,
  sql: string,
  parameters: readonly SqlParameter[] = [],
): Promise<void> {
  if (parameters.length === 0) return void (await connection.run(sql));
  const prepared = await connection.prepare(sql);
  bindParameters(prepared, parameters);
  await prepared.run();
}

/** Streams `sql` on `connection`, prepared and bound when it has parameters. */
export async function streamWith(
  connection: DuckDBConnection,
  sql: string,
  parameters: readonly SqlParameter[] = [],
): Promise<DuckDBResult> {
  if (parameters.length === 0) return await connection.stream(sql);
  const prepared = await connection.prepare(sql);
  bindParameters(prepared, parameters);
  return await prepared.stream();
}

/**
 * The literals a query's plan takes as parameters (coordinator/planning/plan-cache.ts): a cached
 * plan's SQL names them `$p1`, `$p2`, …, and every DuckDB that runs part of it (the owners' scans,
 * the final stage) binds this query's values into a prepared statement, never into the text.
 */
import { Type } from 'typebox';
import { DuckDBTypeId, type DuckDBConnection, type DuckDBPreparedStatement, type DuckDBResult } from '@duckdb/node-api';

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

/** The integer types, their ranges, and how a value of each is bound. */
const INTEGER_TYPES = new Map<DuckDBTypeId, { min: bigint; max: bigint; bind: keyof DuckDBPreparedStatement }>([
  [DuckDBTypeId.TINYINT, { min: -(2n ** 7n), max: 2n ** 7n - 1n, bind: 'bindTinyInt' }],
  [DuckDBTypeId.SMALLINT, { min: -(2n ** 15n), max: 2n ** 15n - 1n, bind: 'bindSmallInt' }],
  [DuckDBTypeId.INTEGER, { min: -(2n ** 31n), max: 2n ** 31n - 1n, bind: 'bindInteger' }],
  [DuckDBTypeId.BIGINT, { min: -(2n ** 63n), max: 2n ** 63n - 1n, bind: 'bindBigInt' }],
  [DuckDBTypeId.HUGEINT, { min: -(2n ** 127n), max: 2n ** 127n - 1n, bind: 'bindHugeInt' }],
  [DuckDBTypeId.UTINYINT, { min: 0n, max: 2n ** 8n - 1n, bind: 'bindUTinyInt' }],
  [DuckDBTypeId.USMALLINT, { min: 0n, max: 2n ** 16n - 1n, bind: 'bindUSmallInt' }],
  [DuckDBTypeId.UINTEGER, { min: 0n, max: 2n ** 32n - 1n, bind: 'bindUInteger' }],
  [DuckDBTypeId.UBIGINT, { min: 0n, max: 2n ** 64n - 1n, bind: 'bindUBigInt' }],
  [DuckDBTypeId.UHUGEINT, { min: 0n, max: 2n ** 128n - 1n, bind: 'bindUHugeInt' }],
]);

/**
 * Binds each parameter `prepared` names. An integer goes in as the integer type DuckDB gave the
 * parameter from what it is compared with, where its value fits, as DuckDB casts an integer
 * literal (bound as an INTEGER, a UHUGEINT column would be compared as a BIGINT, and fail past
 * 2^63); else, and a string always, as the literal's own type, which DuckDB casts the same way it
 * would the literal. A statement may name only some of the query's parameters: the owners' scan
 * has the WHERE, the final stage perhaps not.
 */
export function bindParameters(prepared: DuckDBPreparedStatement, parameters: readonly SqlParameter[]): void {
  const byName = new Map(parameters.map((p) => [p.name, p]));
  for (let i = 1; i <= prepared.parameterCount; i++) {
    const name = prepared.parameterName(i);
    const parameter = byName.get(name);
    if (!parameter) throw new Error(`no value for the parameter $${name}`);
    if (parameter.type === 'VARCHAR') {
      prepared.bindVarchar(i, parameter.value);
      continue;
    }
    const value = BigInt(parameter.value);
    const target = INTEGER_TYPES.get(inferredType(prepared, i));
    if (target && value >= target.min && value <= target.max) {
      const bind = prepared[target.bind] as (index: number, value: number | bigint) => void;
      const wide = target.max > 2n ** 32n;
      bind.call(prepared, i, wide ? value : Number(value));
    } else if (parameter.type === 'INTEGER') prepared.bindInteger(i, Number(value));
    else prepared.bindBigInt(i, value);
  }
}

/** The type DuckDB gave a parameter; INVALID where it could not tell (a comparison with NULL). */
function inferredType(prepared: DuckDBPreparedStatement, index: number): DuckDBTypeId {
  try {
    return prepared.parameterTypeId(index);
  } catch {
    return DuckDBTypeId.INVALID;
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

/**
 * Streams `sql`, one statement, on `connection`, bound to its parameters. Always prepared: the
 * binding's stream(sql) first splits the text into statements and then prepares the last, a round
 * trip to a DuckDB thread more for every scan and final stage.
 */
export async function streamWith(
  connection: DuckDBConnection,
  sql: string,
  parameters: readonly SqlParameter[] = [],
): Promise<DuckDBResult> {
  const prepared = await connection.prepare(sql);
  try {
    bindParameters(prepared, parameters);
    return await prepared.stream();
  } finally {
    prepared.destroySync(); // the result outlives its statement, as in the binding's own stream()
  }
}

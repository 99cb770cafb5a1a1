/**
 * Query results as JSON a client can use: integers as numbers while they are exact (larger ones as
 * strings), decimals as numbers, everything else as DuckDB's own JSON form.
 */
import { DuckDBTypeId, type DuckDBResultReader, type DuckDBType } from '@duckdb/node-api';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export interface JsonResult {
  columns: string[];
  types: string[];
  rows: JsonValue[][];
}

const INTEGER_TYPES = new Set([
  DuckDBTypeId.TINYINT,
  DuckDBTypeId.SMALLINT,
  DuckDBTypeId.INTEGER,
  DuckDBTypeId.BIGINT,
  DuckDBTypeId.HUGEINT,
  DuckDBTypeId.UTINYINT,
  DuckDBTypeId.USMALLINT,
  DuckDBTypeId.UINTEGER,
  DuckDBTypeId.UBIGINT,
  DuckDBTypeId.UHUGEINT,
]);

function converter(type: DuckDBType): (value: JsonValue) => JsonValue {
  const integral = INTEGER_TYPES.has(type.typeId) || (type.typeId === DuckDBTypeId.DECIMAL && (type as { scale: number }).scale === 0);
  if (integral) {
    return (value) => {
      if (value === null || typeof value === 'number') return value;
      const n = Number(value);
      return Number.isSafeInteger(n) ? n : String(value);
    };
  }
  if (type.typeId === DuckDBTypeId.DECIMAL) return (value) => (value === null ? null : Number(value));
  return (value) => value;
}

export function toJsonResult(reader: DuckDBResultReader): JsonResult {
  const types = reader.columnTypes();
  const convert = types.map(converter);
  return {
    columns: reader.columnNames(),
    types: types.map(String),
    rows: (reader.getRowsJson() as JsonValue[][]).map((row) => row.map((value, i) => convert[i]!(value))),
  };
}

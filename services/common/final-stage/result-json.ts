/**
 * Query results as JSON a client can use, and never a value that is not the one DuckDB computed:
 * integers and decimals are JSON numbers while a double holds them exactly (integers up to 2^53,
 * decimals up to 15 significant digits); larger ones are strings with every digit, since a JSON
 * reader (JavaScript's included) would round the number. `types` names each column's DuckDB type,
 * so a client knows which strings are numbers. Non-finite doubles are the strings "Infinity",
 * "-Infinity" and "NaN"; everything else is DuckDB's own JSON form.
 */
import {
  DuckDBTypeId,
  JsonDuckDBValueConverter,
  type DuckDBResult,
  type DuckDBResultReader,
  type DuckDBType,
} from '@duckdb/node-api';
import { resultChunks } from '../duckdb.js';
import { resultTooLarge } from '../errors.js';
import type { JsonValue } from '../../coordinator/api.js';

export type { JsonValue };

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

type Convert = (value: JsonValue) => JsonValue;
const asIs: Convert = (value) => value;

/** How a value of `type` is answered, nested values by the same rules as top-level ones. */
function converter(type: DuckDBType): Convert {
  const integral =
    INTEGER_TYPES.has(type.typeId) || (type.typeId === DuckDBTypeId.DECIMAL && (type as { scale: number }).scale === 0);
  if (integral) {
    return (value) => {
      if (value === null || typeof value === 'number') return value;
      const n = Number(value);
      return Number.isSafeInteger(n) ? n : String(value);
    };
  }
  switch (type.typeId) {
    case DuckDBTypeId.DECIMAL:
      return (value) => (value === null || typeof value === 'number' ? value : exactNumber(String(value)));
    case DuckDBTypeId.LIST:
    case DuckDBTypeId.ARRAY: {
      const item = converter(type.valueType);
      return item === asIs ? asIs : (value) => (value === null ? null : (value as JsonValue[]).map(item));
    }
    case DuckDBTypeId.STRUCT: {
      const members = type.entryTypes.map(converter);
      if (members.every((member) => member === asIs)) return asIs;
      const names = type.entryNames;
      return (value) => {
        if (value === null) return null;
        const object = value as Record<string, JsonValue>;
        return Object.fromEntries(names.map((name, i) => [name, members[i]!(object[name] ?? null)]));
      };
    }
    case DuckDBTypeId.MAP: {
      const [key, item] = [converter(type.keyType), converter(type.valueType)];
      if (key === asIs && item === asIs) return asIs;
      return (value) =>
        value === null
          ? null
          : (value as { key: JsonValue; value: JsonValue }[]).map((entry) => ({
              key: key(entry.key),
              value: item(entry.value),
            }));
    }
    default:
      return asIs;
  }
}

/** Significant digits a double always gives back unchanged. */
const DOUBLE_DIGITS = 15;

/** A decimal's text as a number when a double keeps it exactly, else the text itself. */
function exactNumber(text: string): number | string {
  const significant = text.replace(/^-/, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '');
  return significant.length <= DOUBLE_DIGITS ? Number(text) : text;
}

/** A result and the size of its rows as JSON. */
export interface SizedJsonResult extends JsonResult {
  bytes: number;
}

/** A streamed result's rows as JSON values, one DuckDB chunk (up to 2,048 rows) at a time, fetched as the reader asks. */
export async function* jsonChunks(result: DuckDBResult): AsyncGenerator<JsonValue[][]> {
  const convert = result.columnTypes().map(converter);
  for await (const chunk of resultChunks(result))
    yield (chunk.convertRows(JsonDuckDBValueConverter) as JsonValue[][]).map((row) =>
      row.map((value, i) => convert[i]!(value)),
    );
}

/** Reads a streamed result chunk by chunk, and stops once its JSON passes `maxBytes`, before the rest is ever converted. */
export async function readJsonResult(result: DuckDBResult, maxBytes = Infinity): Promise<SizedJsonResult> {
  const { rows, bytes } = await collectJsonRows(jsonChunks(result), maxBytes);
  return { columns: result.columnNames(), types: result.columnTypes().map(String), rows, bytes };
}

/** Collects rows chunk by chunk, counting their JSON; past `maxBytes`, a 413 before the rest is read. */
export async function collectJsonRows(
  chunks: AsyncIterable<JsonValue[][]>,
  maxBytes = Infinity,
): Promise<{ rows: JsonValue[][]; bytes: number }> {
  const rows: JsonValue[][] = [];
  let bytes = 0;
  for await (const chunk of chunks) {
    for (const row of chunk) {
      bytes += JSON.stringify(row).length + 1;
      if (bytes > maxBytes) throw resultTooLarge(maxBytes);
      rows.push(row);
    }
  }
  return { rows, bytes };
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

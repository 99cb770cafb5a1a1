/**
 * Batches that arrive typed, CSV and Parquet, held to a table's columns before a segment is written.
 *
 * A Parquet batch keeps its own types and a CSV batch gets DuckDB's reading of it (every row
 * sampled), so that a table made from a file answers as one DuckDB over that file. A type a
 * segment cannot hold as itself (docs/types.md) becomes one that holds every value of it
 * (TIMESTAMP_MS → TIMESTAMP, ENUM → VARCHAR, HUGEINT → DECIMAL(38,0)); into an existing table's
 * column a value goes as it is, or by a widening of its kind (INTEGER → BIGINT, FLOAT → DOUBLE).
 * Every value that changes type is checked to come back as itself, and every refusal is a 400
 * that names the column.
 */
import {
  DECIMAL,
  DuckDBStructType,
  DuckDBTypeId,
  LIST,
  MAP,
  TIMESTAMP,
  VARCHAR,
  type DuckDBConnection,
  type DuckDBType,
} from '@duckdb/node-api';
import { quoteIdent } from '../../../core/identifiers.js';
import { sqlString } from '../../common/duckdb.js';
import { badRequest } from '../../common/errors.js';
import type { ColumnSpec } from '../../meta/client.js';

export type TypedFormat = 'csv' | 'parquet';

/** How a CSV batch is read; unset options are DuckDB's detection. */
export interface CsvOptions {
  /** @default true */
  header?: boolean;
  delimiter?: string;
  quote?: string;
  escape?: string;
}

export interface TypedSource {
  format: TypedFormat;
  file: string;
  csv?: CsvOptions;
}

/** The columns a batch gives a table, and how to select them from it. */
export interface TypedPlan {
  /** The table's columns once the batch is in: its own, then those the batch adds. */
  columns: ColumnSpec[];
  /** Columns the table lacks and the batch brings (schema evolution). */
  added: ColumnSpec[];
  /** The SELECT list over the source that yields `columns`, in order. */
  select: string[];
  /** Source columns whose values change type on the way: each value must survive the trip. */
  casts: { name: string; from: string; to: string }[];
}

/** Column types a CSV field goes into as the text it is. */
export const TEXT_TYPES = new Set(['VARCHAR', 'JSON']);

/** Types a table's timestamp column may have: instants that prune and merge by their epoch ms. */
export const TIMESTAMP_TYPES = new Set(['TIMESTAMP', 'TIMESTAMP_NS', 'TIMESTAMP WITH TIME ZONE']);

/** The SQL that reads the batch, with `types` for the CSV columns whose type the table already says. */
export function sourceSql(source: TypedSource, types: Record<string, string> = {}): string {
  if (source.format === 'parquet') return `read_parquet(${sqlString(source.file)})`;
  const csv = source.csv ?? {};
  const options = [
    `header = ${csv.header ?? true}`,
    // Every row typed; and no row dropped by a guess: DuckDB would skip lines it takes for a
    // preamble, or for comments when one starts with '#'.
    'sample_size = -1',
    'skip = 0',
    "comment = ''",
    ...(csv.delimiter !== undefined ? [`delim = ${sqlString(csv.delimiter)}`] : []),
    ...(csv.quote !== undefined ? [`quote = ${sqlString(csv.quote)}`] : []),
    ...(csv.escape !== undefined ? [`escape = ${sqlString(csv.escape)}`] : []),
    ...(Object.keys(types).length > 0
      ? [`types = {${Object.entries(types).map(([name, type]) => `${sqlString(name)}: ${sqlString(type)}`)}}`]
      : []),
  ];
  return `read_csv(${sqlString(source.file)}, ${options.join(', ')})`;
}

/**
 * Reads the batch's columns and plans them into `table`'s (undefined for a table's first batch,
 * whose columns are the batch's own in storable types). `timestampColumn` null: none.
 */
export async function planTypedColumns(
  c: DuckDBConnection,
  source: TypedSource,
  timestampColumn: string | null,
  table?: readonly ColumnSpec[],
): Promise<{ plan: TypedPlan; sql: string }> {
  const read = async (sql: string) => {
    const result = await c.runAndReadAll(`SELECT * FROM ${sql} LIMIT 0`).catch((error: Error) => {
      throw unreadable(source, error);
    });
    return result.columnNames().map((name, i) => ({ name, type: result.columnTypes()[i]! }));
  };
  let sql = sourceSql(source);
  let found = await read(sql);
  checkNames(found.map((col) => col.name));
  const tableType = new Map((table ?? []).map((col) => [col.name, col.type]));
  const byLowerName = new Map((table ?? []).map((col) => [col.name.toLowerCase(), col.name]));
  for (const { name } of found) {
    const same = byLowerName.get(name.toLowerCase());
    if (same !== undefined && same !== name)
      throw badRequest(
        'column_case',
        `column "${name}" differs from the table's column "${same}" only in case: send one spelling`,
      );
  }
  // CSV columns the table keeps as text are read as text ("007" stays "007"). The rest are read
  // as DuckDB reads them and then held to the table like Parquet's: DuckDB's cast of text to a
  // number rounds ('2.5' to BIGINT is 3), so it never reads text as the table's type itself.
  if (source.format === 'csv' && table) {
    const known = Object.fromEntries(
      found
        .filter((col) => TEXT_TYPES.has(tableType.get(col.name) ?? ''))
        .map((col) => [col.name, tableType.get(col.name)!]),
    );
    if (Object.keys(known).length > 0) {
      sql = sourceSql(source, known);
      found = await read(sql);
    }
  }

  const storableOf = new Map<string, string>();
  for (const col of found) storableOf.set(col.name, await describeType(c, storable(col.type, col.name)));
  const fromType = new Map<string, string>();
  for (const col of found) fromType.set(col.name, await describeType(c, col.type));

  const casts: TypedPlan['casts'] = [];
  const selectAs = (name: string, to: string) => {
    const from = fromType.get(name)!;
    if (from === to) return quoteIdent(name);
    casts.push({ name, from, to });
    return `CAST(${quoteIdent(name)} AS ${to}) AS ${quoteIdent(name)}`;
  };

  if (timestampColumn !== null) {
    if (!found.some((col) => col.name === timestampColumn))
      throw badRequest(
        'missing_timestamp',
        `the batch has no "${timestampColumn}" column (the table's timestamp column)`,
      );
    const type = tableType.get(timestampColumn) ?? storableOf.get(timestampColumn)!;
    if (!TIMESTAMP_TYPES.has(type))
      throw badRequest(
        'timestamp_type',
        `column "${timestampColumn}" is ${fromType.get(timestampColumn)}; a table's timestamp column holds instants (${[...TIMESTAMP_TYPES].join(', ')}): name another column or none`,
      );
  }

  if (!table) {
    const columns = found.map((col) => ({ name: col.name, type: storableOf.get(col.name)! }));
    return { plan: { columns, added: [], select: columns.map((col) => selectAs(col.name, col.type)), casts }, sql };
  }
  const sourceNames = new Set(found.map((col) => col.name));
  const select = table.map((col) => {
    if (!sourceNames.has(col.name)) return `CAST(NULL AS ${col.type}) AS ${quoteIdent(col.name)}`;
    const from = fromType.get(col.name)!;
    if (from !== col.type && !widens(storableOf.get(col.name)!, col.type))
      throw badRequest(
        'type_mismatch',
        `column "${col.name}" is ${from} in the batch; the table's column is ${col.type}, which does not hold it as it is`,
      );
    return selectAs(col.name, col.type);
  });
  const added = found
    .filter((col) => !tableType.has(col.name))
    .map((col) => ({ name: col.name, type: storableOf.get(col.name)! }));
  for (const col of added) select.push(selectAs(col.name, col.type));
  return { plan: { columns: [...table, ...added], added, select, casts }, sql };
}

/** Fails with a 400 naming the first value of a cast column that does not come back as itself. */
export async function checkCasts(c: DuckDBConnection, sql: string, casts: TypedPlan['casts']): Promise<void> {
  for (const { name, from, to } of casts) {
    const col = quoteIdent(name);
    const lost = await c.runAndReadAll(
      `SELECT CAST(${col} AS VARCHAR) FROM ${sql} WHERE ${col} IS NOT NULL AND TRY_CAST(TRY_CAST(${col} AS ${to}) AS ${from}) IS DISTINCT FROM ${col} LIMIT 1`,
    );
    const value = lost.getRows()[0]?.[0];
    if (value !== undefined)
      throw badRequest(
        'value_not_kept',
        `column "${name}" (${from}) holds ${JSON.stringify(value)}, which ${to} does not keep as it is`,
      );
  }
}

/**
 * The type that holds every value of `type` in a segment: itself where DuckDB reads it back from
 * Parquet as itself (docs/types.md), else the nearest one that does.
 */
function storable(type: DuckDBType, column: string): DuckDBType {
  switch (type.typeId) {
    case DuckDBTypeId.HUGEINT:
    case DuckDBTypeId.UHUGEINT:
      return DECIMAL(38, 0);
    case DuckDBTypeId.TIMESTAMP_S:
    case DuckDBTypeId.TIMESTAMP_MS:
      return TIMESTAMP;
    case DuckDBTypeId.ENUM:
    case DuckDBTypeId.BIT:
    case DuckDBTypeId.BIGNUM:
      return VARCHAR;
    case DuckDBTypeId.ARRAY:
    case DuckDBTypeId.LIST:
      return LIST(storable(type.valueType, column), type.alias);
    case DuckDBTypeId.MAP:
      return MAP(storable(type.keyType, column), storable(type.valueType, column), type.alias);
    case DuckDBTypeId.STRUCT:
      // DuckDB's Parquet writer stores a UNION so: a nameless tag beside its members.
      if (type.entryNames.some((name) => name === ''))
        throw badRequest(
          'type_not_storable',
          `column "${column}" is ${type.toString()}, a struct with a field without a name, which a table cannot declare`,
        );
      return new DuckDBStructType(
        type.entryNames,
        type.entryTypes.map((t) => storable(t, column)),
        type.alias,
      );
    case DuckDBTypeId.UNION:
    case DuckDBTypeId.VARIANT:
    case DuckDBTypeId.GEOMETRY:
    case DuckDBTypeId.SQLNULL:
      throw badRequest(
        'type_not_storable',
        `column "${column}" is ${type.toString()}, which a segment cannot hold: cast it before sending`,
      );
    default:
      return type;
  }
}

/**
 * A 400 unless a column of an object Berth reads as it is (an attached one) has a type a segment
 * holds as itself: the object is never rewritten into the type that would hold it.
 */
export async function checkStorable(c: DuckDBConnection, column: ColumnSpec): Promise<void> {
  const [type] = (await c.runAndReadAll(`SELECT CAST(NULL AS ${column.type}) LIMIT 0`)).columnTypes();
  const held = await describeType(c, storable(type!, column.name));
  if (held !== column.type)
    throw badRequest(
      'type_not_storable',
      `column "${column.name}" is ${column.type}, which a segment holds only as ${held}: ingest the file instead`,
    );
}

/** Kinds whose narrower types a wider one of the kind holds exactly (values are checked anyway). */
const WIDENINGS: RegExp[] = [
  /^(U?(TINY|SMALL|BIG)?INT(EGER)?|DECIMAL\(\d+,\d+\)|FLOAT|DOUBLE)$/,
  // In UTC (every Berth DuckDB's zone), a TIMESTAMP is the instant a TIMESTAMP WITH TIME ZONE names.
  /^(TIMESTAMP|TIMESTAMP_NS|TIMESTAMP WITH TIME ZONE)$/,
];

/** Whether a batch column of (storable) type `from` may go into a table column of type `to`. */
const widens = (from: string, to: string): boolean =>
  from === to || WIDENINGS.some((kind) => kind.test(from) && kind.test(to));

/** A type in DuckDB's own spelling (DESCRIBE's), as a table's columns are kept. */
async function describeType(c: DuckDBConnection, type: DuckDBType): Promise<string> {
  const rows = (await c.runAndReadAll(`DESCRIBE SELECT CAST(NULL AS ${typeSql(type)}) AS c`)).getRows();
  return String(rows[0]![1]);
}

/** SQL for a type, JSON kept at every depth (a nested JSON's toString says VARCHAR). */
function typeSql(type: DuckDBType): string {
  if (type.alias === 'JSON') return 'JSON';
  switch (type.typeId) {
    case DuckDBTypeId.LIST:
      return `${typeSql(type.valueType)}[]`;
    case DuckDBTypeId.ARRAY:
      return `${typeSql(type.valueType)}[${type.length}]`;
    case DuckDBTypeId.MAP:
      return `MAP(${typeSql(type.keyType)}, ${typeSql(type.valueType)})`;
    case DuckDBTypeId.STRUCT:
      return `STRUCT(${type.entryNames.map((name, i) => `${quoteIdent(name)} ${typeSql(type.entryTypes[i]!)}`).join(', ')})`;
    default:
      return type.toString();
  }
}

/** A 400 unless the batch's column names are ones a table can have. */
function checkNames(names: string[]): void {
  const seen = new Map<string, string>();
  for (const name of names) {
    if (name === '__proto__') throw badRequest('invalid_column', 'a column may not be named "__proto__"');
    const earlier = seen.get(name.toLowerCase());
    if (earlier !== undefined)
      throw badRequest('column_case', `columns "${earlier}" and "${name}" differ only in case: send one spelling`);
    seen.set(name.toLowerCase(), name);
  }
}

/** A 400 quoting DuckDB's reason a batch could not be read, without the coordinator's scratch path. */
export function unreadable(source: TypedSource, error: Error): Error {
  const reason = error.message
    .split('\n')
    .filter((line) => line.trim() !== '' && !/^\s*(file|sample_size|.*\(Auto-Detected\))\s*=?/.test(line))
    .slice(0, 4)
    .join(' ')
    .replaceAll(source.file, 'the body');
  return badRequest(
    'invalid_rows',
    `the ${source.format === 'csv' ? 'CSV' : 'Parquet'} body could not be read: ${reason}`,
  );
}

/**
 * Rows between Berth's services as Arrow IPC streams: a query node writes its DuckDB result batch
 * by batch, and the coordinator writes each batch, as it arrives, into DuckDB chunks: a table's
 * appender, or the final stage's reads of rows held in memory (common/final-stage/held-rows.ts).
 * Nothing touches a file.
 *
 * Every value arrives as DuckDB computed it. Columns are copied as DuckDB lays them out in memory,
 * which for most types is Arrow's own layout (integers, floats, dates, times, timestamps, strings,
 * lists, structs, fixed-size arrays); a DECIMAL travels as Arrow's Decimal128, a BOOLEAN as a
 * bitmap, and the types Arrow has no exact twin for (HUGEINT, UHUGEINT, UUID, INTERVAL, TIME WITH
 * TIME ZONE, BIT, BIGNUM) as DuckDB's own bytes in a fixed-size binary or binary column. Each field
 * names its DuckDB type in the metadata key `duckdb.type`; the receiver writes into chunks whose
 * types it already knows, and refuses a stream whose fields are not of those types. Types outside
 * this list (ENUM, UNION, and the rest) are sent as text by the planner and cast back, which is
 * exact for them.
 */
import { Readable } from 'node:stream';
import duckdb from '@duckdb/node-bindings';
import {
  DuckDBArrayType,
  DuckDBDataChunk,
  DuckDBDecimalType,
  DuckDBListType,
  DuckDBMapType,
  DuckDBStructType,
  DuckDBTypeId,
  type DuckDBAppender,
  type DuckDBResult,
  type DuckDBType,
} from '@duckdb/node-api';
import * as arrow from 'apache-arrow';
import { resultChunks } from './duckdb.js';
import { inconsistent } from './errors.js';

export const ARROW_STREAM_TYPE = 'application/vnd.apache.arrow.stream';

/** Bytes per value of the fixed-width types, as DuckDB stores them. */
const FIXED_WIDTH: Partial<Record<DuckDBTypeId, number>> = {
  [DuckDBTypeId.TINYINT]: 1,
  [DuckDBTypeId.UTINYINT]: 1,
  [DuckDBTypeId.SMALLINT]: 2,
  [DuckDBTypeId.USMALLINT]: 2,
  [DuckDBTypeId.INTEGER]: 4,
  [DuckDBTypeId.UINTEGER]: 4,
  [DuckDBTypeId.FLOAT]: 4,
  [DuckDBTypeId.DATE]: 4,
  [DuckDBTypeId.BIGINT]: 8,
  [DuckDBTypeId.UBIGINT]: 8,
  [DuckDBTypeId.DOUBLE]: 8,
  [DuckDBTypeId.TIME]: 8,
  [DuckDBTypeId.TIME_NS]: 8,
  [DuckDBTypeId.TIME_TZ]: 8,
  [DuckDBTypeId.TIMESTAMP]: 8,
  [DuckDBTypeId.TIMESTAMP_S]: 8,
  [DuckDBTypeId.TIMESTAMP_MS]: 8,
  [DuckDBTypeId.TIMESTAMP_NS]: 8,
  [DuckDBTypeId.TIMESTAMP_TZ]: 8,
  [DuckDBTypeId.HUGEINT]: 16,
  [DuckDBTypeId.UHUGEINT]: 16,
  [DuckDBTypeId.UUID]: 16,
  [DuckDBTypeId.INTERVAL]: 16,
};

/** Types whose values DuckDB keeps as strings (16-byte headers, long ones out of line). */
const STRING_TYPES = new Set([DuckDBTypeId.VARCHAR, DuckDBTypeId.BLOB, DuckDBTypeId.BIT, DuckDBTypeId.BIGNUM]);

/** Bytes a DECIMAL of this width takes in DuckDB's memory. */
const decimalBytes = (width: number): number => (width <= 4 ? 2 : width <= 9 ? 4 : width <= 18 ? 8 : 16);

/** True when the exchange can carry values of this type as they are (else the planner sends text). */
export function carriesExactly(type: DuckDBType): boolean {
  if (FIXED_WIDTH[type.typeId] !== undefined || STRING_TYPES.has(type.typeId)) return true;
  switch (type.typeId) {
    case DuckDBTypeId.BOOLEAN:
    case DuckDBTypeId.DECIMAL:
      return true;
    case DuckDBTypeId.LIST:
    case DuckDBTypeId.ARRAY:
      return carriesExactly((type as DuckDBListType | DuckDBArrayType).valueType);
    case DuckDBTypeId.MAP:
      return carriesExactly((type as DuckDBMapType).keyType) && carriesExactly((type as DuckDBMapType).valueType);
    case DuckDBTypeId.STRUCT:
      return (type as DuckDBStructType).entryTypes.every(carriesExactly);
    default:
      return false;
  }
}

/** The Arrow type a DuckDB type travels as. */
function arrowType(type: DuckDBType): arrow.DataType {
  switch (type.typeId) {
    case DuckDBTypeId.BOOLEAN:
      return new arrow.Bool();
    case DuckDBTypeId.TINYINT:
      return new arrow.Int8();
    case DuckDBTypeId.SMALLINT:
      return new arrow.Int16();
    case DuckDBTypeId.INTEGER:
      return new arrow.Int32();
    case DuckDBTypeId.BIGINT:
      return new arrow.Int64();
    case DuckDBTypeId.UTINYINT:
      return new arrow.Uint8();
    case DuckDBTypeId.USMALLINT:
      return new arrow.Uint16();
    case DuckDBTypeId.UINTEGER:
      return new arrow.Uint32();
    case DuckDBTypeId.UBIGINT:
      return new arrow.Uint64();
    case DuckDBTypeId.FLOAT:
      return new arrow.Float32();
    case DuckDBTypeId.DOUBLE:
      return new arrow.Float64();
    case DuckDBTypeId.DATE:
      return new arrow.DateDay();
    case DuckDBTypeId.TIME:
      return new arrow.TimeMicrosecond();
    case DuckDBTypeId.TIME_NS:
      return new arrow.TimeNanosecond();
    case DuckDBTypeId.TIMESTAMP:
      return new arrow.TimestampMicrosecond();
    case DuckDBTypeId.TIMESTAMP_S:
      return new arrow.TimestampSecond();
    case DuckDBTypeId.TIMESTAMP_MS:
      return new arrow.TimestampMillisecond();
    case DuckDBTypeId.TIMESTAMP_NS:
      return new arrow.TimestampNanosecond();
    case DuckDBTypeId.TIMESTAMP_TZ:
      return new arrow.TimestampMicrosecond('UTC');
    case DuckDBTypeId.DECIMAL:
      return new arrow.Decimal((type as DuckDBDecimalType).scale, (type as DuckDBDecimalType).width, 128);
    case DuckDBTypeId.VARCHAR:
      return new arrow.Utf8();
    case DuckDBTypeId.LIST:
      return new arrow.List(new arrow.Field('item', arrowType((type as DuckDBListType).valueType), true));
    case DuckDBTypeId.MAP: {
      const map = type as DuckDBMapType;
      const entries = new arrow.Struct([
        new arrow.Field('key', arrowType(map.keyType), false),
        new arrow.Field('value', arrowType(map.valueType), true),
      ]);
      return new arrow.List(new arrow.Field('entries', entries, false));
    }
    case DuckDBTypeId.ARRAY:
      return new arrow.FixedSizeList(
        (type as DuckDBArrayType).length,
        new arrow.Field('item', arrowType((type as DuckDBArrayType).valueType), true),
      );
    case DuckDBTypeId.STRUCT: {
      const struct = type as DuckDBStructType;
      return new arrow.Struct(
        struct.entryTypes.map((t, i) => new arrow.Field(struct.entryNames[i]!, arrowType(t), true)),
      );
    }
    default:
      if (STRING_TYPES.has(type.typeId)) return new arrow.Binary();
      if (FIXED_WIDTH[type.typeId] !== undefined) return new arrow.FixedSizeBinary(FIXED_WIDTH[type.typeId]!);
      throw new Error(`the exchange cannot carry ${type.toString()} as it is`);
  }
}

/** The two children DuckDB keeps a MAP's entries in. */
const mapEntries = (type: DuckDBMapType): DuckDBType =>
  new DuckDBStructType(['key', 'value'], [type.keyType, type.valueType]);

// ── DuckDB vector → Arrow data (the sending side) ────────────────────────────────────────────

/** Which of a vector's rows to take: the first `count`, or those `index` lists, in its order. */
interface Rows {
  count: number;
  index?: Uint32Array;
}

/** How many leading slots of the vector the rows reach. */
const span = (rows: Rows): number => (rows.index ? rows.index.reduce((max, i) => Math.max(max, i + 1), 0) : rows.count);
const at = (rows: Rows, i: number): number => (rows.index ? rows.index[i]! : i);

/** A fresh, aligned copy of `length` bytes. */
const copyBytes = (source: Uint8Array, offset: number, length: number): Uint8Array =>
  new Uint8Array(source.buffer.slice(source.byteOffset + offset, source.byteOffset + offset + length));

function validityOf(
  vector: duckdb.Vector,
  rows: Rows,
): { valid: (row: number) => boolean; bitmap?: Uint8Array; nullCount: number } {
  const mask = duckdb.vector_get_validity(vector, Math.ceil(span(rows) / 64) * 8) as Uint8Array | null;
  if (!mask) return { valid: () => true, nullCount: 0 };
  const valid = (row: number) => (mask[row >> 3]! & (1 << (row & 7))) !== 0;
  const bitmap = new Uint8Array(Math.ceil(rows.count / 8));
  let nullCount = 0;
  for (let i = 0; i < rows.count; i++) {
    if (valid(at(rows, i))) bitmap[i >> 3]! |= 1 << (i & 7);
    else nullCount++;
  }
  return nullCount === 0 ? { valid, nullCount } : { valid, bitmap, nullCount };
}

/** The rows of a DuckDB vector as Arrow data. */
function encodeVector(vector: duckdb.Vector, type: DuckDBType, rows: Rows): arrow.Data {
  const { valid, bitmap, nullCount } = validityOf(vector, rows);
  const base = { type: arrowType(type), length: rows.count, nullCount, nullBitmap: bitmap } as const;
  const width = FIXED_WIDTH[type.typeId];
  if (width !== undefined) return arrow.makeData({ ...base, data: fixed(vector, width, rows) } as never);
  if (STRING_TYPES.has(type.typeId)) return arrow.makeData({ ...base, ...strings(vector, rows, valid) } as never);
  switch (type.typeId) {
    case DuckDBTypeId.BOOLEAN: {
      const bytes = duckdb.vector_get_data(vector, span(rows));
      const bits = new Uint8Array(Math.ceil(rows.count / 8));
      for (let i = 0; i < rows.count; i++) if (bytes[at(rows, i)]) bits[i >> 3]! |= 1 << (i & 7);
      return arrow.makeData({ ...base, data: bits } as never);
    }
    case DuckDBTypeId.DECIMAL: {
      const size = decimalBytes((type as DuckDBDecimalType).width);
      const source = fixed(vector, size, rows);
      const view = new DataView(source.buffer, source.byteOffset, source.byteLength);
      const out = new Uint8Array(rows.count * 16);
      const words = new DataView(out.buffer);
      for (let i = 0; i < rows.count; i++) {
        // Sign-extend the value to 128 bits, little-endian two's complement as Arrow's Decimal128.
        if (size === 16) out.set(source.subarray(i * 16, i * 16 + 16), i * 16);
        else {
          const value =
            size === 2
              ? BigInt(view.getInt16(i * 2, true))
              : size === 4
                ? BigInt(view.getInt32(i * 4, true))
                : view.getBigInt64(i * 8, true);
          words.setBigInt64(i * 16, value, true);
          words.setBigInt64(i * 16 + 8, value < 0n ? -1n : 0n, true);
        }
      }
      return arrow.makeData({ ...base, data: new Uint32Array(out.buffer) } as never);
    }
    case DuckDBTypeId.LIST:
    case DuckDBTypeId.MAP: {
      const entries = new BigUint64Array(fixed(vector, 16, rows).buffer);
      const offsets = new Int32Array(rows.count + 1);
      const childIndex: number[] = [];
      let contiguous = true;
      for (let i = 0; i < rows.count; i++) {
        const length = valid(at(rows, i)) ? Number(entries[2 * i + 1]) : 0;
        const start = Number(entries[2 * i]);
        if (length > 0 && start !== childIndex.length) contiguous = false;
        for (let j = 0; j < length; j++) childIndex.push(start + j);
        offsets[i + 1] = offsets[i]! + length;
      }
      const childType =
        type.typeId === DuckDBTypeId.MAP ? mapEntries(type as DuckDBMapType) : (type as DuckDBListType).valueType;
      const childRows: Rows = contiguous
        ? { count: childIndex.length }
        : { count: childIndex.length, index: Uint32Array.from(childIndex) };
      const child = encodeVector(duckdb.list_vector_get_child(vector), childType, childRows);
      return arrow.makeData({ ...base, valueOffsets: offsets, child } as never);
    }
    case DuckDBTypeId.ARRAY: {
      const { length, valueType } = type as DuckDBArrayType;
      const childRows: Rows = rows.index
        ? {
            count: rows.count * length,
            index: Uint32Array.from(
              { length: rows.count * length },
              (_, k) => rows.index![Math.floor(k / length)]! * length + (k % length),
            ),
          }
        : { count: rows.count * length };
      return arrow.makeData({
        ...base,
        child: encodeVector(duckdb.array_vector_get_child(vector), valueType, childRows),
      } as never);
    }
    case DuckDBTypeId.STRUCT: {
      const struct = type as DuckDBStructType;
      const children = struct.entryTypes.map((t, k) =>
        encodeVector(duckdb.struct_vector_get_child(vector, k), t, rows),
      );
      return arrow.makeData({ ...base, children } as never);
    }
    default:
      throw new Error(`the exchange cannot carry ${type.toString()} as it is`);
  }
}

/** The rows' fixed-width values, copied into a buffer of their own. */
function fixed(vector: duckdb.Vector, width: number, rows: Rows): Uint8Array {
  const data = duckdb.vector_get_data(vector, span(rows) * width);
  if (!rows.index) return copyBytes(data, 0, rows.count * width);
  const out = new Uint8Array(rows.count * width);
  for (let i = 0; i < rows.count; i++)
    out.set(data.subarray(rows.index[i]! * width, rows.index[i]! * width + width), i * width);
  return out;
}

/**
 * DuckDB's string headers (length, then 12 inline bytes or a 4-byte prefix and a pointer) as Arrow
 * offsets and bytes. Long strings lie out of line, mostly one after another as DuckDB wrote them:
 * each run of adjacent ones comes over in one copy (a native call per string was the node's
 * largest cost for a column of distinct keys). A run covers exactly its strings' bytes.
 */
function strings(
  vector: duckdb.Vector,
  rows: Rows,
  valid: (row: number) => boolean,
): { valueOffsets: Int32Array; data: Uint8Array } {
  const headers = duckdb.vector_get_data(vector, span(rows) * 16);
  const view = new DataView(headers.buffer, headers.byteOffset, headers.byteLength);
  const offsets = new Int32Array(rows.count + 1);
  for (let i = 0; i < rows.count; i++) {
    const row = at(rows, i);
    // A NULL's header may hold anything, a pointer included: it has no bytes.
    offsets[i + 1] = offsets[i]! + (valid(row) ? view.getUint32(row * 16, true) : 0);
  }
  const data = new Uint8Array(offsets[rows.count]!);
  let run = -1; // the first of the adjacent long strings being gathered
  let runEnd = 0; // where in DuckDB's memory they end
  const copyRun = (until: number) => {
    if (run < 0) return;
    const pointerAt = headers.byteOffset + at(rows, run) * 16 + 8;
    const length = offsets[until]! - offsets[run]!;
    data.set(duckdb.get_data_from_pointer(headers.buffer as ArrayBuffer, pointerAt, length), offsets[run]!);
    run = -1;
  };
  for (let i = 0; i < rows.count; i++) {
    const at16 = at(rows, i) * 16;
    const length = offsets[i + 1]! - offsets[i]!;
    if (length <= 12) {
      copyRun(i);
      data.set(headers.subarray(at16 + 4, at16 + 4 + length), offsets[i]!);
      continue;
    }
    // User-space pointers fit in 53 bits.
    const pointer = view.getUint32(at16 + 8, true) + view.getUint32(at16 + 12, true) * 2 ** 32;
    if (pointer !== runEnd) copyRun(i);
    if (run < 0) run = i;
    runEnd = pointer + length;
  }
  copyRun(rows.count);
  return { valueOffsets: offsets, data };
}

/** Hands each piece of IPC the writer makes to `take` as it makes it (arrow's own queue holds them for an async reader). */
class PieceSink extends arrow.AsyncByteQueue {
  constructor(private readonly take: (piece: Uint8Array) => void) {
    super();
  }

  override write(piece: Uint8Array): void {
    if (piece.byteLength > 0) this.take(piece);
  }
}

/**
 * A DuckDB result as an Arrow IPC stream, read from DuckDB one chunk at a time as the receiver
 * takes the bytes: each read fetches a chunk and hands on its batch as one buffer (one stream, no
 * object-mode stages between DuckDB and the socket: those cost a small scan more than its query).
 * `onRows` hears the row count of each batch sent.
 */
export function arrowStream(result: DuckDBResult, onRows?: (rows: number) => void): Readable {
  const types = result.columnTypes();
  const names = result.columnNames();
  const schema = new arrow.Schema(
    types.map((t, i) => new arrow.Field(names[i]!, arrowType(t), true, new Map([['duckdb.type', t.toString()]]))),
  );
  let pieces: Uint8Array[] = [];
  const taken = () => {
    const bytes = Buffer.concat(pieces);
    pieces = [];
    return bytes;
  };
  const writer = new arrow.RecordBatchStreamWriter().reset(new PieceSink((piece) => pieces.push(piece)), schema);
  const chunks = resultChunks(result);
  let reading = false;
  return new Readable({
    read() {
      if (reading) return;
      reading = true;
      void (async () => {
        try {
          const next = await chunks.next();
          reading = false;
          if (next.done) {
            writer.close(); // the end-of-stream marker
            this.push(taken());
            this.push(null);
            return;
          }
          // One batch per DuckDB chunk (2,048 rows).
          const rows = { count: next.value.rowCount };
          const children = types.map((t, i) =>
            encodeVector(duckdb.data_chunk_get_vector(next.value.chunk, i), t, rows),
          );
          writer.write(
            new arrow.RecordBatch(
              schema,
              arrow.makeData({ type: new arrow.Struct(schema.fields), length: rows.count, nullCount: 0, children }),
            ),
          );
          onRows?.(rows.count);
          this.push(taken());
        } catch (error) {
          this.destroy(error as Error);
        }
      })();
    },
    destroy(error, done) {
      void chunks.return(undefined).catch(() => undefined);
      done(error);
    },
  });
}

// ── Arrow data → DuckDB (the receiving side) ─────────────────────────────────────────────────

/** A field the receiver reads a stream's column as: its name on the wire, its DuckDB type, and the column's name for errors. */
export interface ExpectedField {
  name: string;
  type: DuckDBType;
  column: string;
}

/**
 * Refuses a stream whose fields are not the ones expected, by name and type (the DuckDB type each
 * field names, and the Arrow type that travels as), before any of its bytes are read: a DOUBLE
 * read as a HUGEINT would be garbage, read past the end of its buffer. A sender that disagrees
 * with the plan is no user's fault: a 500 naming the column, never an answer.
 */
function expectSchema(schema: arrow.Schema, expected: readonly ExpectedField[]): void {
  const refuse = (what: string) =>
    inconsistent('exchange_schema_mismatch', `the scan stage sent ${what}; the query is refused rather than misread`);
  if (schema.fields.length !== expected.length)
    throw refuse(`${schema.fields.length} columns where ${expected.length} were expected`);
  expected.forEach(({ name, type, column }, i) => {
    const field = schema.fields[i]!;
    const want = type.toString();
    const got = field.metadata.get('duckdb.type') ?? 'a type it does not name';
    if (field.name !== name) throw refuse(`field "${field.name}" where "${name}" (column "${column}") was expected`);
    if (got !== want) throw refuse(`column "${column}" as ${got} where ${want} was expected`);
    if (String(field.type) !== String(arrowType(type)))
      throw refuse(
        `column "${column}" (${want}) as Arrow ${String(field.type)} where ${String(arrowType(type))} was expected`,
      );
  });
}

/**
 * The record batches of an Arrow IPC stream, as they arrive; a source that fails fails them.
 * Arrow's reader, handed a Node stream, ends quietly when the stream errors (a stream cut short
 * would read as a whole one with fewer rows): it is handed the stream's own iterator instead, whose
 * errors it passes on. With `expected`, the stream's schema is checked (expectSchema) before its
 * first batch.
 */
export async function* arrowBatches(
  source: AsyncIterable<Uint8Array>,
  expected?: readonly ExpectedField[],
): AsyncGenerator<arrow.RecordBatch> {
  const pieces = async function* () {
    for await (const piece of source) yield piece;
  };
  const reader = await arrow.RecordBatchReader.from(pieces());
  if (expected) {
    await reader.open();
    if (reader.schema) expectSchema(reader.schema, expected); // none: an empty source, which has no batches either
  }
  // A stream of no batches reads as one empty placeholder batch whose lists have no child data
  // (Arrow's reader makes it): a batch of no rows carries nothing, so none is passed on.
  for await (const batch of reader) if (batch.numRows > 0) yield batch;
}

function expectColumns(batch: arrow.RecordBatch, types: readonly DuckDBType[]): void {
  if (batch.numCols !== types.length)
    throw new Error(`the exchange sent ${batch.numCols} columns where ${types.length} were expected`);
}

/** Writes rows [from, from + count) of an Arrow batch into a DuckDB chunk of `types` (count at most DuckDB's vector size). */
export function fillChunk(
  chunk: DuckDBDataChunk,
  types: readonly DuckDBType[],
  batch: arrow.RecordBatch,
  from: number,
  count: number,
): void {
  expectColumns(batch, types);
  chunk.rowCount = count;
  types.forEach((type, i) =>
    decodeInto(duckdb.data_chunk_get_vector(chunk.chunk, i), type, batch.data.children[i]!, from, count),
  );
}

/** Appends one Arrow batch to a DuckDB table through its appender, a DuckDB chunk at a time. */
export function appendBatch(appender: DuckDBAppender, types: readonly DuckDBType[], batch: arrow.RecordBatch): void {
  expectColumns(batch, types);
  const chunk = DuckDBDataChunk.create(types);
  const capacity = duckdb.vector_size();
  for (let from = 0; from < batch.numRows; from += capacity) {
    chunk.reset();
    fillChunk(chunk, types, batch, from, Math.min(capacity, batch.numRows - from));
    appender.appendDataChunk(chunk);
  }
}

/** Writes rows [from, from + count) of Arrow data into a fresh DuckDB vector. */
function decodeInto(vector: duckdb.Vector, type: DuckDBType, data: arrow.Data, from: number, count: number): void {
  if (count === 0) return;
  const start = data.offset + from;
  if (data.nullCount > 0 && data.nullBitmap) {
    const mask = new Uint8Array(Math.ceil(count / 64) * 8);
    for (let i = 0; i < count; i++)
      if (data.nullBitmap[(start + i) >> 3]! & (1 << ((start + i) & 7))) mask[i >> 3]! |= 1 << (i & 7);
    duckdb.vector_ensure_validity_writable(vector);
    duckdb.copy_data_to_vector_validity(vector, 0, mask.buffer, 0, mask.byteLength);
  }
  const copy = (bytes: Uint8Array) =>
    duckdb.copy_data_to_vector(vector, 0, bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.byteLength);
  const values = data.values as ArrayBufferView | undefined;
  const raw = values ? new Uint8Array(values.buffer, values.byteOffset, values.byteLength) : new Uint8Array(0);
  const width = FIXED_WIDTH[type.typeId];
  if (width !== undefined) {
    // The bytes DuckDB copies must all be there: a buffer of narrower values is refused, never read past.
    if (raw.byteLength < (start + count) * width)
      throw new Error(
        `the exchange sent ${raw.byteLength} bytes of ${type.toString()} where ${(start + count) * width} are needed`,
      );
    return copy(raw.subarray(start * width, (start + count) * width));
  }
  if (STRING_TYPES.has(type.typeId)) return writeStrings(vector, data, start, count);
  switch (type.typeId) {
    case DuckDBTypeId.BOOLEAN: {
      const bytes = new Uint8Array(count);
      for (let i = 0; i < count; i++) bytes[i] = (raw[(start + i) >> 3]! >> ((start + i) & 7)) & 1;
      return copy(bytes);
    }
    case DuckDBTypeId.DECIMAL: {
      const size = decimalBytes((type as DuckDBDecimalType).width);
      if (size === 16) return copy(raw.subarray(start * 16, (start + count) * 16));
      const out = new Uint8Array(count * size);
      for (let i = 0; i < count; i++) out.set(raw.subarray((start + i) * 16, (start + i) * 16 + size), i * size);
      return copy(out);
    }
    case DuckDBTypeId.LIST:
    case DuckDBTypeId.MAP: {
      const offsets = data.valueOffsets as Int32Array;
      const first = offsets[start]!;
      const total = offsets[start + count]! - first;
      const entries = new BigUint64Array(count * 2);
      for (let i = 0; i < count; i++) {
        entries[2 * i] = BigInt(offsets[start + i]! - first);
        entries[2 * i + 1] = BigInt(offsets[start + i + 1]! - offsets[start + i]!);
      }
      duckdb.list_vector_reserve(vector, total);
      duckdb.list_vector_set_size(vector, total);
      copy(new Uint8Array(entries.buffer));
      const childType =
        type.typeId === DuckDBTypeId.MAP ? mapEntries(type as DuckDBMapType) : (type as DuckDBListType).valueType;
      return decodeInto(duckdb.list_vector_get_child(vector), childType, data.children[0]!, first, total);
    }
    case DuckDBTypeId.ARRAY: {
      const { length, valueType } = type as DuckDBArrayType;
      return decodeInto(
        duckdb.array_vector_get_child(vector),
        valueType,
        data.children[0]!,
        start * length,
        count * length,
      );
    }
    case DuckDBTypeId.STRUCT:
      (type as DuckDBStructType).entryTypes.forEach((t, k) =>
        decodeInto(duckdb.struct_vector_get_child(vector, k), t, data.children[k]!, start, count),
      );
      return;
    default:
      throw new Error(`the exchange cannot carry ${type.toString()} as it is`);
  }
}

/**
 * Strings as DuckDB's 16-byte headers, written in one copy. A short string (12 bytes or fewer)
 * sits in its header. The longer ones point into one copy of the rows' bytes that the vector owns:
 * it comes over as the first long string's value, in one native call (one per string was the
 * coordinator's largest cost for a partial of many distinct strings), and each header then points
 * at its string in it, the first one's too.
 */
function writeStrings(vector: duckdb.Vector, data: arrow.Data, start: number, count: number): void {
  const offsets = data.valueOffsets as Int32Array;
  const bytes = data.values as Uint8Array;
  const headers = new Uint8Array(count * 16);
  const view = new DataView(headers.buffer);
  let firstLong = -1;
  for (let i = 0; i < count; i++) {
    const from = offsets[start + i]!;
    const length = offsets[start + i + 1]! - from;
    view.setUint32(i * 16, length, true);
    if (length <= 12) headers.set(bytes.subarray(from, from + length), i * 16 + 4);
    else if (firstLong < 0) firstLong = i;
  }
  if (firstLong >= 0) {
    const base = offsets[start + firstLong]!;
    const end = offsets[start + count]!;
    duckdb.vector_assign_string_element_len(vector, firstLong, bytes.subarray(base, end));
    // DuckDB checks a VARCHAR's UTF-8 as it takes it, and marks a row it refuses NULL, not failing.
    const validity = duckdb.vector_get_validity(vector, Math.ceil(count / 64) * 8);
    if (
      data.getValid(start - data.offset + firstLong) &&
      validity &&
      !duckdb.validity_row_is_valid(validity, firstLong)
    )
      throw new Error('the exchange was sent a string that is not valid UTF-8');
    const headersNow = duckdb.vector_get_data(vector, count * 16);
    const owned = new DataView(headersNow.buffer, headersNow.byteOffset + firstLong * 16, 16);
    const low = owned.getUint32(8, true);
    const high = owned.getUint32(12, true);
    for (let i = firstLong; i < count; i++) {
      const from = offsets[start + i]!;
      if (offsets[start + i + 1]! - from <= 12) continue;
      for (let k = 0; k < 4; k++) headers[i * 16 + 4 + k] = bytes[from + k]!; // the prefix
      const address = low + (from - base);
      view.setUint32(i * 16 + 8, address >>> 0, true);
      view.setUint32(i * 16 + 12, high + Math.floor(address / 2 ** 32), true);
    }
  }
  duckdb.copy_data_to_vector(vector, 0, headers.buffer, 0, headers.byteLength);
}

/**
 * Checks of NDJSON rows before DuckDB reads them, each failure a 400 that names the line (and the
 * field). Two checks, because DuckDB is too forgiving for one and too fragile for the other:
 *
 * - nesting depth, counted byte by byte while the body streams in: DuckDB's JSON reader takes
 *   minutes over a 2 KB row nested 1,000 deep and crashes the process at 100,000;
 * - the table's schema, row by row: DuckDB would silently round 2.7 into an INTEGER column, turn
 *   "201" into 201 and drop fields the table does not have. Here a value must fit its column as
 *   it is; only widening that loses nothing passes (an integer into a DOUBLE while a double holds
 *   it exactly, a whole number written as 3.0 into an integer column).
 *
 * A table's first batch gets its columns from the typing rule (core/json-typing.ts) first.
 */
import { createReadStream } from 'node:fs';
import { Transform } from 'node:stream';
import { parse as parseLossless } from 'lossless-json';
import {
  ColumnInference,
  DATE_TEXT,
  exactInDouble,
  INFINITE_TEXT,
  isDigits,
  isIntegerText,
  keptInJson,
  NumberText,
  onTheCalendar,
  TIMESTAMP_TEXT,
  TypingRefusal,
  type JsonNumber,
} from '../../../core/json-typing.js';
import { ndjsonLines } from '../../common/ndjson-lines.js';
import { badRequest, DomainError } from '../../common/errors.js';
import type { ColumnSpec } from '../../meta/client.js';

/** @default for BERTH_INGEST_MAX_DEPTH */
export const DEFAULT_MAX_DEPTH = 64;

const [OPEN_BRACE, OPEN_BRACKET, CLOSE_BRACE, CLOSE_BRACKET, QUOTE, BACKSLASH, NEWLINE] = [
  0x7b, 0x5b, 0x7d, 0x5d, 0x22, 0x5c, 0x0a,
];

/** Passes the bytes through, and fails with a 400 as soon as a row nests deeper than `maxDepth`. */
export function nestingLimit(maxDepth: number): Transform {
  let depth = 0;
  let line = 1;
  let inString = false;
  let escaped = false;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      for (const byte of chunk) {
        if (inString) {
          if (escaped) escaped = false;
          else if (byte === BACKSLASH) escaped = true;
          else if (byte === QUOTE) inString = false;
          else if (byte === NEWLINE) line++;
        } else if (byte === QUOTE) inString = true;
        else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
          if (++depth > maxDepth)
            return callback(
              badRequest('too_deep', `line ${line}: nested deeper than ${maxDepth} levels (BERTH_INGEST_MAX_DEPTH)`),
            );
        } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) depth = Math.max(0, depth - 1);
        else if (byte === NEWLINE) {
          line++;
          depth = 0; // a broken row ends at its newline; the JSON check names it
        }
      }
      callback(null, chunk);
    },
  });
}

// ── the schema ───────────────────────────────────────────────────────────────────────────────

type Shape =
  | { kind: 'integer'; type: string; min: bigint; max: bigint }
  | { kind: 'float'; type: string }
  | { kind: 'decimal'; type: string; width: number; scale: number }
  | { kind: 'boolean'; type: string }
  | { kind: 'timestamp'; type: string }
  | { kind: 'date'; type: string }
  | { kind: 'string'; type: string }
  | { kind: 'list'; type: string; of: Shape }
  | { kind: 'struct'; type: string; fields: Map<string, Shape> }
  | { kind: 'map'; type: string; value: Shape }
  | { kind: 'any'; type: string };

const INTEGER_RANGES: Record<string, [bigint, bigint]> = {
  TINYINT: [-(2n ** 7n), 2n ** 7n - 1n],
  SMALLINT: [-(2n ** 15n), 2n ** 15n - 1n],
  INTEGER: [-(2n ** 31n), 2n ** 31n - 1n],
  BIGINT: [-(2n ** 63n), 2n ** 63n - 1n],
  HUGEINT: [-(2n ** 127n), 2n ** 127n - 1n],
  UTINYINT: [0n, 2n ** 8n - 1n],
  USMALLINT: [0n, 2n ** 16n - 1n],
  UINTEGER: [0n, 2n ** 32n - 1n],
  UBIGINT: [0n, 2n ** 64n - 1n],
  UHUGEINT: [0n, 2n ** 128n - 1n],
};

/** Reads a DuckDB type as DESCRIBE spells it: `BIGINT`, `DECIMAL(18,3)`, `VARCHAR[]`, `STRUCT(a BIGINT, "b c" MAP(VARCHAR, DOUBLE))`. */
export function parseType(text: string): Shape {
  let at = 0;
  const rest = () => text.slice(at);
  const skip = () => {
    while (text[at] === ' ') at++;
  };
  const name = (): string => {
    skip();
    if (text[at] === '"') {
      let out = '';
      for (at++; at < text.length; at++) {
        if (text[at] === '"' && text[at + 1] === '"') {
          out += '"';
          at++;
        } else if (text[at] === '"') break;
        else out += text[at];
      }
      at++;
      return out;
    }
    const match = /^[^\s,()]+/.exec(rest());
    at += match?.[0].length ?? 0;
    return match?.[0] ?? '';
  };
  const shape = (): Shape => {
    skip();
    const start = at;
    const word = /^[A-Z_]+( WITH TIME ZONE)?/.exec(rest())?.[0] ?? '';
    at += word.length;
    let result: Shape;
    if (word === 'STRUCT' && text[at] === '(') {
      at++;
      const fields = new Map<string, Shape>();
      while (text[at] !== ')' && at < text.length) {
        const field = name();
        fields.set(field, shape());
        skip();
        if (text[at] === ',') at++;
      }
      at++;
      result = { kind: 'struct', type: text.slice(start, at), fields };
    } else if (word === 'MAP' && text[at] === '(') {
      at++;
      shape();
      skip();
      at++; // ','
      const value = shape();
      skip();
      at++; // ')'
      result = { kind: 'map', type: text.slice(start, at), value };
    } else if (word === 'DECIMAL' && text[at] === '(') {
      const [, width, scale] = /^\((\d+),\s*(\d+)\)/.exec(rest()) ?? ['', '18', '3'];
      at += /^\([^)]*\)/.exec(rest())![0].length;
      result = { kind: 'decimal', type: text.slice(start, at), width: Number(width), scale: Number(scale) };
    } else {
      if (text[at] === '(') at += /^\([^)]*\)/.exec(rest())?.[0].length ?? 0; // ENUM(...) and the like
      const type = text.slice(start, at);
      const range = INTEGER_RANGES[word];
      if (range) result = { kind: 'integer', type, min: range[0], max: range[1] };
      else if (word === 'DOUBLE' || word === 'FLOAT') result = { kind: 'float', type };
      else if (word === 'BOOLEAN') result = { kind: 'boolean', type };
      else if (word === 'TIMESTAMP' || word === 'TIMESTAMP WITH TIME ZONE') result = { kind: 'timestamp', type };
      else if (word === 'DATE') result = { kind: 'date', type };
      else if (word === 'JSON') result = { kind: 'any', type };
      else result = { kind: 'string', type }; // VARCHAR, dates and times, UUID, BLOB, ENUM...: text, which DuckDB then casts
    }
    while (text[at] === '[') {
      at += /^\[\d*\]/.exec(rest())?.[0].length ?? 1;
      result = { kind: 'list', type: text.slice(start, at), of: result };
    }
    return result;
  };
  return shape();
}

/** Why `value` does not fit `shape` as it is, or undefined when it does. */
function misfit(value: unknown, shape: Shape): string | undefined {
  if (value === null) return undefined;
  const got = () =>
    `got ${JSON.stringify(value, (_, v: unknown) => (isDigits(v) ? Number(v.digits) : v))?.slice(0, 60)}`;
  const numberText = typeof value === 'number' ? String(value) : isDigits(value) ? value.digits : undefined;
  switch (shape.kind) {
    case 'integer': {
      const whole =
        numberText !== undefined &&
        (isIntegerText(numberText) ||
          /^-?\d+(\.0*)?$/.test(numberText) ||
          (typeof value === 'number' && Number.isInteger(value)));
      if (!whole) return `expected ${shape.type}, ${got()}`;
      const n = typeof value === 'number' ? BigInt(value) : BigInt(numberText.replace(/\.0*$/, ''));
      return n < shape.min || n > shape.max ? `${numberText} is out of ${shape.type}'s range` : undefined;
    }
    case 'float':
      if (typeof value === 'number') return undefined;
      if (numberText !== undefined)
        return exactInDouble(numberText) ? undefined : `${numberText} is not kept exactly by a ${shape.type}`;
      return `expected ${shape.type}, ${got()}`;
    case 'decimal': {
      if (numberText === undefined) return `expected ${shape.type}, ${got()}`;
      const [mantissa = '', exponent = '0'] = numberText.replace(/^-/, '').toLowerCase().split('e');
      const [whole = '', fraction = ''] = mantissa.split('.');
      const shift = Number(exponent);
      const digits = `${whole}${fraction}`.replace(/^0+/, '');
      const fractionDigits = Math.max(0, fraction.replace(/0+$/, '').length - shift);
      const wholeDigits = Math.max(0, digits.length - fraction.length + shift);
      if (fractionDigits > shape.scale)
        return `${numberText} has more than ${shape.scale} decimal places (${shape.type})`;
      return wholeDigits > shape.width - shape.scale ? `${numberText} is out of ${shape.type}'s range` : undefined;
    }
    case 'boolean':
      return typeof value === 'boolean' ? undefined : `expected ${shape.type}, ${got()}`;
    case 'timestamp':
      if (typeof value === 'string' && INFINITE_TEXT.test(value)) return undefined;
      if (typeof value === 'string' && (TIMESTAMP_TEXT.test(value) || DATE_TEXT.test(value)))
        return onTheCalendar(value) ? undefined : `${got()}, which is not a date-time on the calendar`;
      return `expected ${shape.type} as an ISO 8601 string such as "2026-11-01T00:00:00Z", ${got()}`;
    case 'date':
      if (typeof value === 'string' && INFINITE_TEXT.test(value)) return undefined;
      if (typeof value === 'string' && DATE_TEXT.test(value))
        return onTheCalendar(value) ? undefined : `${got()}, which is not a date on the calendar`;
      return `expected ${shape.type} as an ISO 8601 string such as "2026-11-01", ${got()}`;
    case 'string':
      return typeof value === 'string' ? undefined : `expected ${shape.type} (as a JSON string), ${got()}`;
    case 'list':
      if (!Array.isArray(value)) return `expected ${shape.type}, ${got()}`;
      for (const [i, item] of value.entries()) {
        const why = misfit(item, shape.of);
        if (why) return `[${i}]: ${why}`;
      }
      return undefined;
    case 'struct':
    case 'map':
      if (value === null || typeof value !== 'object' || Array.isArray(value) || isDigits(value))
        return `expected ${shape.type}, ${got()}`;
      for (const [key, item] of Object.entries(value)) {
        if (key === PROTO) return `.${PROTO}: ${NO_PROTO}`;
        const field = shape.kind === 'map' ? shape.value : shape.fields.get(key);
        if (!field) return `.${key} is not a field of ${shape.type}`;
        const why = misfit(item, field);
        if (why) return `.${key}: ${why}`;
      }
      return undefined;
    case 'any': {
      const unkept = unkeptInJson(value);
      return unkept === undefined ? undefined : `${unkept} would not be kept in a ${shape.type} column as written`;
    }
    default:
      return undefined;
  }
}

/** The first number in a JSON value that a JSON column would not keep as written (keptInJson). */
function unkeptInJson(value: unknown): string | undefined {
  if (isDigits(value)) return keptInJson(value.digits) ? undefined : value.digits;
  if (value === null || typeof value !== 'object') return undefined;
  for (const item of Array.isArray(value) ? value : Object.values(value)) {
    const unkept = unkeptInJson(item);
    if (unkept !== undefined) return unkept;
  }
  return undefined;
}

/** JavaScript objects treat this key specially all the way to the client: refused, at every level. */
const PROTO = '__proto__';
const NO_PROTO = `a field may not be named ${PROTO}`;

/**
 * Numbers whose text the fast parser loses: long runs of digits a double may not hold, and a
 * fraction or an exponent (1.0 is a DOUBLE's value, not the integer 1). Lines without one (or
 * without such a run inside a string either) take the fast parser.
 */
const NUMBER_TEXT_MATTERS = /[0-9.eE+-]{16,}|\d[.eE]/;

/** One NDJSON line, its numbers as JsonNumber (core/json-typing.ts). */
export function parseRow(line: string): unknown {
  if (!NUMBER_TEXT_MATTERS.test(line)) return JSON.parse(line);
  return parseRowStrictly(line);
}

/**
 * One JSON text, its numbers as JsonNumber, and a key given twice in one object refused as DuckDB
 * refuses it: for a row that must be judged alone, before it joins a batch.
 */
export function parseRowStrictly(line: string): unknown {
  return parseLossless(line, null, (digits): JsonNumber =>
    Number(digits).toString() === digits ? Number(digits) : new NumberText(digits),
  );
}

/** Each row of an NDJSON file, parsed, with its line number; a line that is not a JSON object is a 400 naming it. */
async function* rowsOf(file: string): AsyncGenerator<[line: number, row: Record<string, unknown>]> {
  let line = 0;
  for await (const text of ndjsonLines(createReadStream(file))) {
    line++;
    if (text.trim() === '') continue;
    // gzip's magic number, 1f 8b, read as UTF-8.
    if (line === 1 && text.startsWith('\u001f\ufffd'))
      throw badRequest('compressed_body', 'the body is gzip-compressed: send the NDJSON rows uncompressed');
    let row: unknown;
    try {
      row = parseRow(text);
    } catch (error) {
      // The parser quotes the line: bytes that are not text are shown as U+FFFD, never raw.
      // eslint-disable-next-line no-control-regex -- control bytes are what it replaces
      const reason = (error as Error).message.replace(/[\u0000-\u001f\u007f]/g, '\ufffd');
      throw rowError(line, `not valid JSON (${reason})`);
    }
    if (row === null || typeof row !== 'object' || Array.isArray(row)) throw rowError(line, 'not a JSON object');
    yield [line, row as Record<string, unknown>];
  }
}

const rowError = (line: number, why: string): DomainError => badRequest('row_does_not_fit', `line ${line}: ${why}`);

/** checkRows met a field the table does not have (not one that differs from a column only in case): schema evolution's cue. */
export class NewField extends DomainError {
  constructor(line: number, field: string, columns: Iterable<string>) {
    super(
      'invalid',
      'row_does_not_fit',
      `line ${line}: field "${field}" is not a column of the table (its columns: ${[...columns].join(', ')})`,
    );
  }
}

/** A new table's columns from its first batch, by the typing rule; a batch it refuses is a 400 naming the line and field. */
export async function inferColumns(file: string, timestampColumn: string | null): Promise<ColumnSpec[]> {
  const inference = new ColumnInference();
  for await (const [line, row] of rowsOf(file)) {
    try {
      inference.add(row);
    } catch (error) {
      if (error instanceof TypingRefusal) throw rowError(line, error.message);
      throw error;
    }
  }
  try {
    return inference.columns(timestampColumn ?? undefined);
  } catch (error) {
    if (error instanceof TypingRefusal) throw badRequest('row_does_not_fit', error.message);
    throw error;
  }
}

/**
 * Schema evolution: columns for the fields of a batch that a table's `columns` lack (by name, in
 * any case), typed by the typing rule over those fields alone, in the order they first appear;
 * none when the batch brings no new field. A field it refuses is a 400 naming its line and field.
 */
export async function newColumns(file: string, columns: readonly ColumnSpec[]): Promise<ColumnSpec[]> {
  const known = new Set(columns.map((c) => c.name.toLowerCase()));
  const inference = new ColumnInference();
  for await (const [line, row] of rowsOf(file)) {
    const fresh = Object.entries(row).filter(([field]) => !known.has(field.toLowerCase()));
    if (fresh.length === 0) continue;
    if (fresh.some(([field]) => field === PROTO)) throw rowError(line, NO_PROTO);
    try {
      inference.add(Object.fromEntries(fresh));
    } catch (error) {
      if (error instanceof TypingRefusal) throw rowError(line, error.message);
      throw error;
    }
  }
  try {
    return inference.columns();
  } catch (error) {
    if (error instanceof TypingRefusal) throw badRequest('row_does_not_fit', error.message);
    throw error;
  }
}

/** Why one row does not fit a table's columns: `field` is set when the row has a field the table lacks. */
export type RowMisfit = { why: string; newField?: string };

/** A table's columns, ready to check rows against one at a time. */
export class RowShapes {
  private readonly shapes: Map<string, Shape>;
  private readonly lowerCase: Map<string, string>;

  constructor(columns: readonly ColumnSpec[]) {
    this.shapes = new Map(columns.map((c) => [c.name, parseType(c.type)]));
    this.lowerCase = new Map(columns.map((c) => [c.name.toLowerCase(), c.name]));
  }

  get names(): IterableIterator<string> {
    return this.shapes.keys();
  }

  /** Why `row` does not fit, or undefined when every field is a column and every value fits it as it is. */
  misfit(row: Record<string, unknown>): RowMisfit | undefined {
    for (const [field, value] of Object.entries(row)) {
      if (field === PROTO) return { why: NO_PROTO };
      const shape = this.shapes.get(field);
      if (!shape) {
        const column = this.lowerCase.get(field.toLowerCase());
        if (!column)
          return {
            why: `field "${field}" is not a column of the table (its columns: ${[...this.names].join(', ')})`,
            newField: field,
          };
        return {
          why: `field "${field}" differs from the table's column "${column}" only in case, and SQL names ignore case: send it as "${column}"`,
        };
      }
      const why = misfit(value, shape);
      if (why) return { why: `field "${field}"${why.startsWith('.') || why.startsWith('[') ? '' : ': '}${why}` };
    }
    return undefined;
  }
}

/**
 * Checks every row of an NDJSON file against a table's columns; the first row that does not fit is
 * a 400 naming its line and field, a NewField when the field is not one of them.
 */
export async function checkRows(file: string, columns: readonly ColumnSpec[]): Promise<void> {
  const shapes = new RowShapes(columns);
  for await (const [line, row] of rowsOf(file)) {
    const misfit = shapes.misfit(row);
    if (misfit?.newField !== undefined) throw new NewField(line, misfit.newField, shapes.names);
    if (misfit) throw rowError(line, misfit.why);
  }
}

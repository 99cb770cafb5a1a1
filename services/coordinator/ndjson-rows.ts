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
 */
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { Transform } from 'node:stream';
import { isInteger, parse as parseLossless } from 'lossless-json';
import { badRequest, type DomainError } from '../common/errors.js';
import type { ColumnSpec } from '../meta/client.js';

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

/** A JSON number as read here: a double, or its exact digits when a double could not hold them. */
type JsonNumber = number | { digits: string };

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
        (isInteger(numberText) ||
          /^-?\d+(\.0*)?$/.test(numberText) ||
          (typeof value === 'number' && Number.isInteger(value)));
      if (!whole) return `expected ${shape.type}, ${got()}`;
      const n = typeof value === 'number' ? BigInt(value) : BigInt(numberText.replace(/\.0*$/, ''));
      return n < shape.min || n > shape.max ? `${numberText} is out of ${shape.type}'s range` : undefined;
    }
    case 'float':
      if (typeof value === 'number') return undefined;
      if (numberText !== undefined)
        return isInteger(numberText) ? `${numberText} has more digits than a ${shape.type} keeps` : undefined;
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
    default:
      return undefined;
  }
}

/** JavaScript objects treat this key specially all the way to the client: refused, at every level. */
const PROTO = '__proto__';
const NO_PROTO = `a field may not be named ${PROTO}`;

const isDigits = (value: unknown): value is { digits: string } =>
  typeof value === 'object' && value !== null && 'digits' in value && Object.keys(value).length === 1;

/** Numbers a double may not hold exactly: long runs of digits. Lines without one take the fast parser. */
const LONG_NUMBER = /[0-9.eE+-]{16,}/;

function parseRow(line: string): unknown {
  if (!LONG_NUMBER.test(line)) return JSON.parse(line);
  return parseLossless(line, null, (digits): JsonNumber =>
    Number(digits).toString() === digits ? Number(digits) : { digits },
  );
}

/** Checks every row of an NDJSON file against a table's columns; the first row that does not fit is a 400 naming its line and field. */
export async function checkRows(file: string, columns: readonly ColumnSpec[]): Promise<void> {
  const shapes = new Map(columns.map((c) => [c.name, parseType(c.type)]));
  let line = 0;
  const fail = (why: string): DomainError => badRequest('row_does_not_fit', `line ${line}: ${why}`);
  for await (const text of createInterface({ input: createReadStream(file), crlfDelay: Infinity })) {
    line++;
    if (text.trim() === '') continue;
    let row: unknown;
    try {
      row = parseRow(text);
    } catch (error) {
      throw fail(`not valid JSON (${(error as Error).message})`);
    }
    if (row === null || typeof row !== 'object' || Array.isArray(row)) throw fail('not a JSON object');
    for (const [field, value] of Object.entries(row)) {
      if (field === PROTO) throw fail(NO_PROTO);
      const shape = shapes.get(field);
      if (!shape)
        throw fail(`field "${field}" is not a column of the table (its columns: ${[...shapes.keys()].join(', ')})`);
      const why = misfit(value, shape);
      if (why) throw fail(`field "${field}"${why.startsWith('.') || why.startsWith('[') ? '' : ': '}${why}`);
    }
  }
}

/**
 * Exact on any data (issue 24): fast-check generates NDJSON batches, the data and the schema, with
 * values at every boundary of docs/types.md's rule. Each batch is a table's first batch, sent to a
 * real cluster through the HTTP ingest endpoint. A batch the rule refuses must be a 400 that names a
 * refused field, with nothing committed. An accepted batch must answer `SELECT *` and per-column
 * aggregates exactly as one DuckDB reading the same NDJSON with the columns docs/types.md gives
 * (written out here, independently of core/json-typing.ts), values and types, doubles included.
 * Where a field's generator fixes its type (mixed-sign small integers are a BIGINT, not HUGEINT),
 * the type is checked against the page too, and every `ts` against the instant it was written as.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import fc from 'fast-check';
import { parse as parseLossless } from 'lossless-json';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ColumnInference, NumberText, TypingRefusal } from '../core/json-typing.js';
import { sqlString } from '../services/common/duckdb.js';
import { describe as describeColumns } from '../services/common/parquet-columns.js';
import type { ColumnSpec } from '../services/meta/client.js';
import { readJsonResult, type JsonResult, type JsonValue } from '../services/common/final-stage/result-json.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';
import { resultDifference } from './helpers/compare-results.js';
import { fuzzReplay } from './helpers/fuzz-replay.js';

// ── generated JSON, kept as its text ─────────────────────────────────────────────────────────

/** A JSON value as the batch spells it: numbers keep their text (`1.0`, `-0.0`, 2^64). */
type J =
  | { k: 'null' }
  | { k: 'num'; text: string }
  | { k: 'bool'; v: boolean }
  | { k: 'str'; v: string }
  | { k: 'arr'; items: J[] }
  | { k: 'obj'; entries: [string, J][] };

const NULL: J = { k: 'null' };
const num = (text: string | bigint | number): J => ({ k: 'num', text: String(text) });
const str = (v: string): J => ({ k: 'str', v });
const arr = (items: J[]): J => ({ k: 'arr', items });
const obj = (entries: [string, J][]): J => ({ k: 'obj', entries });

function toJson(value: J): string {
  switch (value.k) {
    case 'null':
      return 'null';
    case 'num':
      return value.text;
    case 'bool':
      return String(value.v);
    case 'str':
      return JSON.stringify(value.v);
    case 'arr':
      return `[${value.items.map(toJson).join(',')}]`;
    case 'obj':
      return `{${value.entries.map(([key, v]) => `${JSON.stringify(key)}:${toJson(v)}`).join(',')}}`;
  }
}

/** The value as ndjson-rows.ts hands it to ColumnInference: a number that prints as its text, or its text. */
function toParsed(value: J): unknown {
  switch (value.k) {
    case 'null':
      return null;
    case 'num':
      return Number(value.text).toString() === value.text ? Number(value.text) : new NumberText(value.text);
    case 'bool':
      return value.v;
    case 'str':
      return value.v;
    case 'arr':
      return value.items.map(toParsed);
    case 'obj':
      return Object.fromEntries(value.entries.map(([key, v]) => [key, toParsed(v)]));
  }
}

// ── the rule, as docs/types.md says it ───────────────────────────────────────────────────────

const BIGINT_MIN = -(2n ** 63n);
const BIGINT_MAX = 2n ** 63n - 1n;
const UBIGINT_MAX = 2n ** 64n - 1n;
const INTEGER_TEXT = /^-?\d+$/;
/** An ISO 8601 date-time: a date, a time to the second or finer, an optional UTC offset. */
const DATE_TIME_TEXT = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}(:?\d{2})?)?$/;
const DATE_ONLY_TEXT = /^\d{4}-\d{2}-\d{2}$/;
const INFINITE = /^-?infinity$/;

/** A number's exact value in one spelling: significant digits and the power of ten (`2.50`, `25e-1`: `25e-1`). */
function decimalValue(text: string): string {
  const [, sign, whole, fraction = '', exponent = '0'] = /^(-?)(\d+)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text)!;
  let digits = `${whole}${fraction}`.replace(/^0+/, '');
  if (digits === '') return '0';
  let power = Number(exponent) - fraction.length;
  const zeros = /0*$/.exec(digits)![0].length;
  digits = digits.slice(0, digits.length - zeros);
  power += zeros;
  return `${sign}${digits}e${power}`;
}

/** A DOUBLE keeps a number when the double nearest it prints as the same number, or is exactly that integer. */
function doubleKeeps(text: string): boolean {
  const double = Number(text);
  if (!Number.isFinite(double)) return false;
  const value = decimalValue(text);
  return (
    decimalValue(String(double)) === value ||
    (Number.isInteger(double) && decimalValue(BigInt(double).toString()) === value)
  );
}

const quoteName = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** Case conflicts anywhere in the values (SQL names ignore case): each refused field's path, into `refused`. */
function caseConflicts(values: J[], path: string, refused: Set<string>): void {
  const byName = new Map<string, J[]>();
  const spelled = new Map<string, string>();
  // Every array's items are one field's values, in order: a name's first spelling may be in an earlier row.
  const items: J[] = [];
  for (const value of values) {
    if (value.k === 'arr') items.push(...value.items);
    if (value.k !== 'obj') continue;
    for (const [name, v] of value.entries) {
      if (!byName.has(name)) {
        const other = spelled.get(name.toLowerCase());
        if (other !== undefined) refused.add(`${path}.${name}`);
        else spelled.set(name.toLowerCase(), name);
        byName.set(name, []);
      }
      byName.get(name)!.push(v);
    }
  }
  if (items.length) caseConflicts(items, `${path}[]`, refused);
  for (const [name, vs] of byName) caseConflicts(vs, `${path}.${name}`, refused);
}

/** The column type docs/types.md gives a field with these values; a field it refuses goes into `refused`. */
function docType(values: J[], path: string, refused: Set<string>): string {
  const present = values.filter((v) => v.k !== 'null');
  const kinds = new Set(present.map((v) => v.k));
  if (kinds.size === 0) return 'VARCHAR';
  if (kinds.size > 1) return 'JSON'; // each value kept as its JSON text: nothing inside it is typed
  const texts = present.flatMap((v) => (v.k === 'num' ? [v.text] : v.k === 'str' ? [v.v] : []));
  switch ([...kinds][0]) {
    case 'bool':
      return 'BOOLEAN';
    case 'num': {
      if (texts.some((t) => !INTEGER_TEXT.test(t))) {
        if (!texts.every(doubleKeeps)) refused.add(path);
        return 'DOUBLE';
      }
      const ints = texts.map(BigInt);
      const min = ints.reduce((a, b) => (b < a ? b : a));
      const max = ints.reduce((a, b) => (b > a ? b : a));
      if (min >= BIGINT_MIN && max <= BIGINT_MAX) return 'BIGINT';
      if (min >= 0n && max <= UBIGINT_MAX) return 'UBIGINT';
      if (ints.some((n) => (n < 0n ? -n : n).toString().length > 38)) refused.add(path);
      return 'DECIMAL(38,0)';
    }
    case 'str':
      // (Dates with ±infinity and no date-time are not generated: the page reads them as TIMESTAMP, the code as DATE.)
      if (!texts.every((t) => DATE_TIME_TEXT.test(t) || DATE_ONLY_TEXT.test(t) || INFINITE.test(t))) return 'VARCHAR';
      if (texts.some((t) => DATE_TIME_TEXT.test(t))) return 'TIMESTAMP';
      return texts.every((t) => DATE_ONLY_TEXT.test(t)) ? 'DATE' : 'VARCHAR';
    case 'obj': {
      const members = new Map<string, J[]>();
      for (const v of present)
        for (const [name, member] of (v as Extract<J, { k: 'obj' }>).entries) {
          if (!members.has(name)) members.set(name, []);
          members.get(name)!.push(member);
        }
      if (members.size === 0) return 'JSON';
      const types = [...members].map(([name, vs]) => `${quoteName(name)} ${docType(vs, `${path}.${name}`, refused)}`);
      return `STRUCT(${types.join(', ')})`;
    }
    default: {
      const items = present.flatMap((v) => (v as Extract<J, { k: 'arr' }>).items);
      return `${docType(items, `${path}[]`, refused)}[]`;
    }
  }
}

type Row = [string, J][];

interface Expected {
  columns: { name: string; type: string }[];
  /** The fields the rule refuses the batch for (a 400 must name one). */
  refused: Set<string>;
  /** Whether a row has no \`ts\` (null or missing): refused too, when the segment is written. */
  tsMissing: boolean;
}

/** The table's columns by docs/types.md, or the fields it refuses; `ts` is the timestamp column. */
function expectedColumns(rows: Row[]): Expected {
  const refused = new Set<string>();
  const fields = new Map<string, J[]>();
  const spelled = new Map<string, string>();
  for (const row of rows)
    for (const [name, value] of row) {
      if (!fields.has(name)) {
        const other = spelled.get(name.toLowerCase());
        if (other !== undefined) refused.add(name);
        else spelled.set(name.toLowerCase(), name);
        fields.set(name, []);
      }
      fields.get(name)!.push(value);
    }
  const columns = [...fields].map(([name, values]) => {
    caseConflicts(values, name, refused);
    if (name !== 'ts') return { name, type: docType(values, name, refused) };
    // The timestamp column: ISO 8601 strings, never an epoch number.
    const present = values.filter((v) => v.k !== 'null');
    const timestamps = present.every(
      (v) => v.k === 'str' && (DATE_TIME_TEXT.test(v.v) || DATE_ONLY_TEXT.test(v.v) || INFINITE.test(v.v)),
    );
    if (!timestamps || present.length === 0) refused.add('ts');
    return { name, type: 'TIMESTAMP' };
  });
  const tsMissing = rows.some((row) => !row.some(([name, v]) => name === 'ts' && v.k !== 'null'));
  return { columns, refused, tsMissing };
}

/** How DuckDB reads a column from JSON (docs/types.md): a TIMESTAMP as TIMESTAMPTZ, cast back in UTC. */
const readType = (type: string) => type.replace(/\bTIMESTAMP\b/g, 'TIMESTAMPTZ');

// ── generators ───────────────────────────────────────────────────────────────────────────────

/** A generated field's kind: its values, the values that fix its type (a row each), and that type. */
interface Kind {
  name: string;
  value: fc.Arbitrary<J>;
  witnesses: fc.Arbitrary<J[]>;
  /** The type docs/types.md gives the field once every witness has a row: a type, a pattern, or 'refused'. */
  fixed?: string | RegExp;
}

const REFUSED = 'refused';
const kind = (name: string, value: fc.Arbitrary<J>, witnesses: fc.Arbitrary<J[]>, fixed?: string | RegExp): Kind => ({
  name,
  value,
  witnesses,
  fixed,
});

const SMALL_EDGES = ['0', '1', '-1', '2', '-2', '42', '-1000'];
const BIGINT_EDGES = ['9007199254740991', '9007199254740993', '-9223372036854775808', '9223372036854775807'];
const UBIGINT_EDGES = ['9223372036854775808', '18446744073709551615'];
const DECIMAL_EDGES = [
  '18446744073709551616',
  '-9223372036854775809',
  '99999999999999999999999999999999999999',
  '-99999999999999999999999999999999999999',
  '10000000000000000000000000000000000000',
  '-12345678901234567890123456789012345678',
];
const INT39_EDGES = [
  '100000000000000000000000000000000000000',
  '-170141183460469231731687303715884105728',
  '340282366920938463463374607431768211455',
];
/** Numbers with a fraction or an exponent that a double keeps. */
const EXACT_FRACTIONS = [
  '-0.0',
  '0.1',
  '1e308',
  '5e-324',
  '1.0',
  '2.50',
  '1e3',
  '-1.5E-7',
  '1.7976931348623157e308',
  '-2.2250738585072014e-308',
  '0.30000000000000004',
  '18446744073709551616.0',
];
/** Integers a double is exactly, or prints as (10^38): they may share a DOUBLE column. */
const EXACT_INTEGERS = ['0', '-1', '7', '18446744073709551616', '-9223372036854775808', '9223372036854775808'];
/** Numbers a double does not keep. */
const INEXACT = [
  '1.00000000000000000001',
  '0.1000000000000000000000001',
  '9007199254740993.0',
  '1e400',
  '-1e400',
  '123456789012345678901.5',
];

const smallInt = fc.integer({ min: -1000, max: 1000 }).map(num);
const anyDouble = fc
  .double({ noNaN: true, noDefaultInfinity: true })
  .map((d) => num(Object.is(d, -0) ? '-0.0' : String(d)));
const exactNumber = fc.oneof(fc.constantFrom(...EXACT_FRACTIONS, ...EXACT_INTEGERS).map(num), anyDouble, smallInt);
const decimalInt = fc.oneof(
  fc.constantFrom(...SMALL_EDGES, ...BIGINT_EDGES, ...UBIGINT_EDGES, ...DECIMAL_EDGES).map(num),
  fc.bigInt(-(10n ** 38n) + 1n, 10n ** 38n - 1n).map(num),
);

const pad = (n: number, width = 2) => String(n).padStart(width, '0');
const mod = (a: number, m: number) => ((a % m) + m) % m;
const OFFSETS: [minutes: number, text: string][] = [
  [0, 'Z'],
  [0, ''],
  [0, '+00:00'],
  [330, '+05:30'],
  [-300, '-0500'],
  [300, '+05'],
  [-570, '-09:30'],
  [840, '+14:00'],
  [-720, '-1200'],
  [345, '+0545'],
];

/** A date-time naming `micros` (µs since the epoch, UTC) in one of ISO 8601's spellings, and that instant in UTC as DuckDB prints it. */
const dateTime = (micros: fc.Arbitrary<number>) =>
  fc
    .record({
      micros,
      offset: fc.constantFrom(...OFFSETS),
      separator: fc.constantFrom('T', ' '),
      digits: fc.integer({ min: 0, max: 9 }),
      beyond: fc.integer({ min: 0, max: 999 }),
    })
    .map(({ micros: at, offset: [minutes, offsetText], separator, digits, beyond }) => {
      const instant = digits >= 6 ? at : at - mod(at, 10 ** (6 - digits)); // what the text can say
      const local = new Date(Math.floor(instant / 1000) + minutes * 60_000);
      const fraction = pad(mod(instant, 1_000_000), 6) + pad(beyond, 3);
      const text =
        `${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())}${separator}` +
        `${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())}` +
        `${digits > 0 ? `.${fraction.slice(0, digits)}` : ''}${offsetText}`;
      const utc = new Date(Math.floor(instant / 1000)).toISOString().slice(0, 19).replace('T', ' ');
      const micro = pad(mod(instant, 1_000_000), 6).replace(/0+$/, '');
      return { text, utc: micro ? `${utc}.${micro}` : utc };
    });

const MICROS_1900 = Date.UTC(1900, 0, 1) * 1000;
const MICROS_2100 = Date.UTC(2100, 0, 1) * 1000;
const anyInstant = fc.integer({ min: MICROS_1900, max: MICROS_2100 });
const dateTimeText = dateTime(anyInstant).map(({ text }) => str(text));
const dateText = fc
  .integer({ min: -25_567, max: 47_482 })
  .map((day) => str(new Date(day * 86_400_000).toISOString().slice(0, 10)));
const timestampText = fc.oneof(
  { weight: 6, arbitrary: dateTimeText },
  { weight: 2, arbitrary: dateText },
  { weight: 1, arbitrary: fc.constantFrom('infinity', '-infinity').map(str) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(
        '2026-11-01T05:30:00+05:30',
        '1970-01-01T00:00:00Z',
        '0001-01-01 00:00:00',
        '2026-11-01 05:30:00.123Z',
      )
      .map(str),
  },
);
const SPECIAL_STRINGS = [
  '',
  '123',
  '-0.5',
  '1e3',
  '18446744073709551616',
  'true',
  'null',
  '2026-11-01x',
  'ünïcødé ✓',
  '名前',
  '😀👍🏽',
  'tab\there',
  'quote"back\\slash',
  'line\nbreak',
  // JSON.stringify leaves these raw; Node 24's readline would split a row at them.
  'line\u2028and\u2029paragraph',
  'nul\u0000byte',
];
const anyString = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 10 }).map(str),
  fc.constantFrom(...SPECIAL_STRINGS).map(str),
);

const one = (value: fc.Arbitrary<J>) => value.map((v) => [v]);
const SCALAR_KINDS: Kind[] = [
  kind(
    'mixed-sign small integers',
    smallInt,
    fc.tuple(fc.integer({ min: -1000, max: -1 }), fc.integer({ min: 1, max: 1000 })).map((ns) => ns.map(num)),
    'BIGINT',
  ),
  kind(
    'integers at BIGINT edges',
    fc.oneof(fc.constantFrom(...SMALL_EDGES, ...BIGINT_EDGES).map(num), fc.bigInt(BIGINT_MIN, BIGINT_MAX).map(num)),
    fc.constant([num(BIGINT_MIN), num(BIGINT_MAX)]),
    'BIGINT',
  ),
  kind(
    'non-negative integers past BIGINT',
    fc.oneof(
      fc.constantFrom('0', '1', '9223372036854775807', ...UBIGINT_EDGES).map(num),
      fc.bigInt(0n, UBIGINT_MAX).map(num),
    ),
    one(fc.oneof(fc.constantFrom(...UBIGINT_EDGES).map(num), fc.bigInt(BIGINT_MAX + 1n, UBIGINT_MAX).map(num))),
    'UBIGINT',
  ),
  kind(
    'integers of up to 38 digits',
    decimalInt,
    fc.oneof<fc.Arbitrary<J[]>[]>(
      one(fc.constantFrom(...DECIMAL_EDGES).map(num)),
      fc.constant([num(2n ** 63n), num(-1)]),
      fc.constant([num(UBIGINT_MAX), num(BIGINT_MIN)]),
    ),
    'DECIMAL(38,0)',
  ),
  kind('integers of 39 digits', decimalInt, one(fc.constantFrom(...INT39_EDGES).map(num)), REFUSED),
  kind(
    'integers of any size',
    fc.oneof(
      { weight: 20, arbitrary: decimalInt },
      { weight: 20, arbitrary: smallInt },
      { weight: 1, arbitrary: fc.constantFrom(...INT39_EDGES).map(num) },
    ),
    fc.constant([]),
  ),
  kind('doubles', exactNumber, one(fc.constantFrom(...EXACT_FRACTIONS).map(num)), 'DOUBLE'),
  kind('doubles with one a double does not keep', exactNumber, one(fc.constantFrom(...INEXACT).map(num)), REFUSED),
  kind(
    'numbers of any kind',
    fc.oneof(
      { weight: 20, arbitrary: exactNumber },
      { weight: 5, arbitrary: decimalInt },
      { weight: 1, arbitrary: fc.constantFrom(...INEXACT, ...INT39_EDGES).map(num) },
    ),
    fc.constant([]),
  ),
  kind(
    'booleans',
    fc.boolean().map((v): J => ({ k: 'bool', v })),
    one(fc.constant<J>({ k: 'bool', v: false })),
    'BOOLEAN',
  ),
  kind('strings', anyString, one(fc.constantFrom(...SPECIAL_STRINGS).map(str)), 'VARCHAR'),
  kind('timestamps', timestampText, one(dateTimeText), 'TIMESTAMP'),
  kind('dates', dateText, one(dateText), 'DATE'),
  kind('nulls', fc.constant(NULL), fc.constant([]), 'VARCHAR'),
  kind('empty objects', fc.constant(obj([])), fc.constant([obj([])]), 'JSON'),
  kind('empty arrays', fc.constant(arr([])), fc.constant([arr([])]), 'VARCHAR[]'),
];
const acceptedKind = fc.constantFrom(...SCALAR_KINDS.filter((k) => k.fixed !== REFUSED));
const refusedKind = fc.constantFrom(...SCALAR_KINDS.filter((k) => k.fixed === REFUSED));
/** Kinds inside objects and arrays: every scalar one, the refused now and then. */
const scalarKind = fc.oneof({ weight: 30, arbitrary: acceptedKind }, { weight: 1, arbitrary: refusedKind });

/** Field names: unicode, a keyword, `größe` beside `GRÖSSE` (not the same name in lower case). */
const NAMES = ['a', 'b', 'größe', 'GRÖSSE', 'Äpfel', '名前', 'ça va', 'userId', 'select', 'x_1', '😀'];
/** Each name's spelling in another case (`userId`, `userid`); `seq` and `ts` are the row's own. */
const TWINS: Record<string, string> = {
  a: 'A',
  b: 'B',
  Äpfel: 'äpfel',
  'ça va': 'ÇA VA',
  userId: 'userid',
  select: 'SELECT',
  x_1: 'X_1',
  größe: 'Seq',
  GRÖSSE: 'TS',
  名前: 'Seq',
  '😀': 'TS',
};

/** Distinct names (in lower case too), and one in `1 / twins` lists also a name differing from one of them only in case. */
const namesOf = (minLength: number, maxLength: number, twins: number) =>
  fc
    .tuple(
      fc.uniqueArray(fc.constantFrom(...NAMES), { minLength, maxLength, selector: (n) => n.toLowerCase() }),
      fc.oneof({ weight: twins - 1, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
    )
    .map(([names, twin]) => (twin ? [...names, TWINS[names[0]!]!] : names));

const withNulls = (value: fc.Arbitrary<J>) =>
  fc.oneof({ weight: 5, arbitrary: value }, { weight: 1, arbitrary: fc.constant(NULL) });

/** Objects of a few named members, each of its own kind, nested `depth` levels at most. */
function objectKind(depth: number): fc.Arbitrary<Kind> {
  return namesOf(1, 3, 15)
    .chain((names) => fc.tuple(fc.constant(names), fc.tuple(...names.map(() => nestedKind(depth - 1)))))
    .map(([names, kinds]): Kind => {
      const conflict = new Set(names.map((n) => n.toLowerCase())).size < names.length;
      const refusedMember = kinds.some((k) => k.fixed === REFUSED);
      const value = fc
        .tuple(...kinds.map((k) => fc.option(withNulls(k.value), { nil: undefined, freq: 4 })))
        .map((members) => obj(names.flatMap((name, i): [string, J][] => (members[i] ? [[name, members[i]]] : []))));
      // The witnesses: object j holds each member's j-th witness, and the first holds every member.
      const witnesses = fc.tuple(...kinds.map((k) => k.witnesses)).map((ws) => {
        const count = Math.max(1, ...ws.map((w) => w.length));
        return Array.from({ length: count }, (_, j) =>
          obj(
            names.flatMap((name, i): [string, J][] =>
              ws[i]![j] ? [[name, ws[i]![j]!]] : j === 0 ? [[name, NULL]] : [],
            ),
          ),
        );
      });
      return kind(
        `objects of ${names.map((n, i) => `${n}: ${kinds[i]!.name}`).join(', ')}`,
        value,
        witnesses,
        conflict || refusedMember ? REFUSED : /^STRUCT\(/,
      );
    });
}

/** Arrays (empty too) of one kind of item, up to 3 items. */
function arrayKind(depth: number): fc.Arbitrary<Kind> {
  return nestedKind(depth - 1).map((item): Kind =>
    kind(
      `arrays of ${item.name}`,
      fc.array(withNulls(item.value), { maxLength: 3 }).map(arr),
      item.witnesses.map((ws) => [arr(ws)]),
      item.fixed === REFUSED ? REFUSED : typeof item.fixed === 'string' ? `${item.fixed}[]` : /\[\]$/,
    ),
  );
}

function nestedKind(depth: number): fc.Arbitrary<Kind> {
  if (depth <= 0) return scalarKind;
  return fc.oneof(
    { weight: 6, arbitrary: scalarKind },
    { weight: 1, arbitrary: objectKind(depth) },
    { weight: 1, arbitrary: arrayKind(depth) },
  );
}

/**
 * Numbers whose JSON text survives DuckDB's JSON reader, which rewrites a number with a fraction or
 * an exponent as the double's text (18446744073709551616.0 becomes 18446744073709552000.0,
 * 1.00000000000000000001 becomes 1.0): see the known bug below.
 */
const jsonKeeps = (value: J) =>
  value.k !== 'num' ||
  INTEGER_TEXT.test(value.text) ||
  decimalValue(String(Number(value.text))) === decimalValue(value.text);
const jsonNumber = exactNumber.filter(jsonKeeps);

/** Values of more than one kind in one field: a JSON column. */
const mixedValue = fc.oneof(
  smallInt,
  jsonNumber,
  fc.constantFrom(...DECIMAL_EDGES, ...INT39_EDGES).map(num),
  anyString,
  fc.boolean().map((v): J => ({ k: 'bool', v })),
  fc.array(fc.oneof(smallInt, anyString, jsonNumber), { maxLength: 3 }).map(arr),
  fc.tuple(jsonNumber, anyString, timestampText).map(([n, s, t]) =>
    obj([
      ['n', n],
      ['s', s],
      ['t', t],
    ]),
  ),
);
const MIXED = kind(
  'values of several kinds',
  mixedValue,
  fc.constantFrom<J[]>(
    [num(1), str('1')],
    [obj([['k', num('1.0')]]), arr([num(1)])],
    [{ k: 'bool', v: true }, num(0)],
    [str('x'), obj([])],
    [num('2.5'), str('2026-11-01T00:00:00Z')],
  ),
  'JSON',
);

const fieldKind = fc.oneof(
  { weight: 20, arbitrary: acceptedKind },
  { weight: 1, arbitrary: refusedKind },
  { weight: 5, arbitrary: objectKind(3) },
  { weight: 5, arbitrary: arrayKind(3) },
  { weight: 4, arbitrary: fc.constant(MIXED) },
);

interface Field {
  name: string;
  /** The generator kind's name and the type it fixes (see Kind). */
  kind: { name: string; fixed?: string | RegExp };
  /** One per row: undefined where the row lacks the field. */
  values: (J | undefined)[];
  /** Whether every witness got a row of its own (the field's kind then fixes its type). */
  fixes: boolean;
}

function fieldOf(name: string, rows: number): fc.Arbitrary<Field> {
  return fieldKind.chain((k) =>
    fc
      .tuple(
        fc.array(
          fc.oneof(
            { weight: 6, arbitrary: k.value },
            { weight: 1, arbitrary: fc.constant(NULL) },
            { weight: 1, arbitrary: fc.constant(undefined) },
          ),
          { minLength: rows, maxLength: rows },
        ),
        k.witnesses,
        fc.nat(rows - 1),
      )
      .map(([generated, witnesses, start]): Field => {
        // As many witnesses as there are rows: the first one always (a timestamps field always has a date-time).
        const values = [...generated];
        witnesses.slice(0, rows).forEach((w, j) => (values[(start + j) % rows] = w));
        return { name, kind: { name: k.name, fixed: k.fixed }, values, fixes: witnesses.length <= rows };
      }),
  );
}

/** The `ts` of each row: distinct instants in seq order (so that sums of doubles add in one order), each in one of ISO 8601's spellings. */
function timestampsOf(rows: number) {
  return fc
    .tuple(
      fc.integer({ min: Date.UTC(2000, 0, 1) / 1000, max: Date.UTC(2040, 0, 1) / 1000 }),
      fc.array(fc.integer({ min: 1, max: 30 * 86_400 }), { minLength: rows, maxLength: rows }),
      fc.array(fc.integer({ min: 0, max: 999_999 }), { minLength: rows, maxLength: rows }),
    )
    .chain(([start, steps, micros]) => {
      let second = start;
      const instants = steps.map((step, i) => (second += step) * 1_000_000 + micros[i]!);
      return fc.tuple(...instants.map((at) => dateTime(fc.constant(at))));
    });
}

/** A deliberately wrong `ts` in one row: an epoch number, a time that is no ISO 8601, none at all. */
const wrongTimestamp = fc.oneof(
  fc.constantFrom('1793491200', '1793491200000', '1793491200.5').map(num),
  fc.constantFrom('yesterday', '2026-11-01T05:30', '').map(str),
  fc.constant(NULL),
  fc.constant(undefined),
);

interface Batch {
  rows: Row[];
  fields: Field[];
  /** Each row's `ts` as the instant DuckDB prints, in UTC. */
  utc: string[];
  ndjson: string;
  [fc.toStringMethod]: () => string;
}

const batchArb: fc.Arbitrary<Batch> = fc.integer({ min: 1, max: 20 }).chain((n) =>
  fc
    .tuple(
      namesOf(2, 5, 12).chain((names) => fc.tuple(...names.map((name) => fieldOf(name, n)))),
      timestampsOf(n),
      fc.oneof(
        { weight: 9, arbitrary: fc.constant(undefined) },
        { weight: 1, arbitrary: fc.tuple(fc.nat(n - 1), wrongTimestamp) },
      ),
    )
    .map(([fields, timestamps, wrong]): Batch => {
      const rows = timestamps.map(({ text }, i): Row => {
        const ts: J | undefined = wrong?.[0] === i ? wrong[1] : str(text);
        return [
          ['seq', num(i)],
          ...(ts ? [['ts', ts] as [string, J]] : []),
          ...fields.flatMap((f): [string, J][] => (f.values[i] ? [[f.name, f.values[i]]] : [])),
        ];
      });
      const ndjson = rows.map((row) => toJson(obj(row))).join('\n') + '\n';
      // fast-check shows a counterexample as its NDJSON.
      return { rows, fields, utc: timestamps.map((t) => t.utc), ndjson, [fc.toStringMethod]: () => ndjson };
    }),
);

// ── one DuckDB over the same NDJSON ──────────────────────────────────────────────────────────

type Answer = { result: JsonResult } | { error: string };

/** DuckDB's answers to `queries` over the NDJSON file read as `table` with the columns given, and the table's columns as DuckDB spells them. */
async function referenceAnswers(
  db: DuckDBInstance,
  file: string,
  table: string,
  columns: { name: string; type: string }[],
  queries: string[],
): Promise<{ columns: ColumnSpec[]; answers: Answer[] }> {
  const c = await db.connect();
  try {
    await c.run(`SET TimeZone = 'UTC'`);
    const spec = columns.map((col) => `${sqlString(col.name)}: ${sqlString(readType(col.type))}`).join(', ');
    const recast = columns
      .filter((col) => readType(col.type) !== col.type)
      .map((col) => `CAST(${quoteName(col.name)} AS ${col.type}) AS ${quoteName(col.name)}`);
    await c.run(
      `CREATE TEMP TABLE ${table} AS SELECT * ${recast.length ? `REPLACE (${recast.join(', ')})` : ''} ` +
        `FROM read_json(${sqlString(file)}, format = 'newline_delimited', columns = {${spec}})`,
    );
    const answers: Answer[] = [];
    const described = await describeColumns(c, table);
    for (const sql of queries) {
      try {
        answers.push({ result: await readJsonResult(await c.stream(sql)) });
      } catch (error) {
        answers.push({ error: (error as Error).message });
      }
    }
    return { columns: described, answers };
  } finally {
    c.closeSync();
  }
}

/** The queries each accepted batch answers: every row in seq order (doubles as text too, for -0.0), and per-column aggregates. */
function queriesFor(table: string, columns: { name: string; type: string }[]): string[] {
  const doubles = columns.filter((c) => c.type === 'DOUBLE');
  const select =
    `SELECT *${doubles.map((c, i) => `, CAST(${quoteName(c.name)} AS VARCHAR) AS text_${i}`).join('')} ` +
    `FROM ${table} ORDER BY seq`;
  const aggregates = columns.flatMap((c, i) => {
    const q = quoteName(c.name);
    const numeric = /^(BIGINT|UBIGINT|DECIMAL\(38,0\)|DOUBLE)$/.test(c.type);
    return [
      `min(${q}) AS min_${i}`,
      `max(${q}) AS max_${i}`,
      `count(${q}) AS count_${i}`,
      ...(numeric ? [`sum(${q}) AS sum_${i}`] : []),
    ];
  });
  return [select, `SELECT count(*) AS n, ${aggregates.join(', ')} FROM ${table}`];
}

/** Whether a JSON column's value is the generated value: the same structure, numbers the same in value. */
function sameJson(got: unknown, want: J): boolean {
  switch (want.k) {
    case 'null':
      return got === null;
    case 'num':
      return got instanceof NumberText && decimalValue(got.digits) === decimalValue(want.text);
    case 'bool':
      return got === want.v;
    case 'str':
      return got === want.v;
    case 'arr':
      return Array.isArray(got) && got.length === want.items.length && want.items.every((v, i) => sameJson(got[i], v));
    case 'obj': {
      if (got === null || typeof got !== 'object' || Array.isArray(got) || got instanceof NumberText) return false;
      const entries = Object.entries(got);
      return (
        entries.length === want.entries.length &&
        want.entries.every(([name, v], i) => entries[i]?.[0] === name && sameJson(entries[i][1], v))
      );
    }
  }
}

const parseJsonText = (text: string): unknown => parseLossless(text, null, (digits) => new NumberText(digits));

/** Rejects when `promise` takes longer than `ms`: every call to the cluster is bounded. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>(
      (_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms)),
    ),
  ]).finally(() => clearTimeout(timer));
}

const CALL_MS = 20_000;

describe('exact on any data', () => {
  let cluster: TestCluster;
  let reference: DuckDBInstance;
  let dir: string;
  let tables = 0;

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2], coordinator: { queryDeadlineMs: CALL_MS } });
    reference = await DuckDBInstance.create(':memory:', { threads: '1' });
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-data-exactness-'));
  });
  afterAll(async () => {
    reference?.closeSync();
    await cluster?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const ingest = (table: string, ndjson: string) => within(cluster.ingest(table, ndjson), CALL_MS, `ingest ${table}`);
  const query = (sql: string) => within(cluster.query(sql), CALL_MS, sql);

  it('answers 2026-11-01T05:30:00+05:30 as the instant 2026-11-01 00:00:00', async () => {
    const table = 'instant_offsets';
    const ndjson = [
      '{"ts": "2026-11-01T05:30:00+05:30", "local": "2026-10-31T19:00:00-0500"}',
      '{"ts": "2026-11-01T00:00:00.5Z", "local": "2026-11-01 05:00:00+05"}',
    ].join('\n');
    expect((await ingest(table, ndjson)).status).toBe(200);
    const { status, body } = await query(
      `SELECT ts, local FROM ${table} WHERE ts = TIMESTAMP '2026-11-01 00:00:00' ORDER BY ts`,
    );
    expect(status, body.message).toBe(200);
    expect(body.types).toEqual(['TIMESTAMP', 'TIMESTAMP']);
    expect(body.rows).toEqual([['2026-11-01 00:00:00', '2026-11-01 00:00:00']]);
  });

  // DuckDB's JSON reader writes a number with a fraction or an exponent back as its double's
  // shortest text (integers keep every digit): a JSON column refuses one whose shortest text is
  // another number, naming the field, on the first batch and on later ones.
  it('refuses, in a JSON column, a number it would not keep as written, and commits nothing', async () => {
    const table = 'json_numbers';
    const first = [
      '{"ts": "2026-11-01T00:00:00Z", "j": 1.00000000000000000001}',
      '{"ts": "2026-11-01T00:00:02Z", "j": "x"}',
    ].join('\n');
    const refused = await ingest(table, first);
    expect(refused.status).toBe(400);
    expect(JSON.stringify(refused.body)).toMatch(/field \\"j\\": .*1\.00000000000000000001 would not be kept in JSON/);
    expect(await cluster.meta.findTable(table)).toBeUndefined();

    expect(
      (await ingest(table, '{"ts": "2026-11-01T00:00:00Z", "j": 2.50}\n{"ts": "2026-11-01T00:00:01Z", "j": "x"}'))
        .status,
    ).toBe(200);
    const later = await ingest(table, '{"ts": "2026-11-01T00:00:03Z", "j": {"k": 18446744073709551616.0}}');
    expect(later.status).toBe(400);
    expect(JSON.stringify(later.body)).toMatch(
      /field \\"j\\".*18446744073709551616\.0 would not be kept in a JSON column/,
    );
    const { body } = await query(`SELECT j FROM ${table} ORDER BY ts`);
    expect(body.rows).toEqual([['2.5'], ['"x"']]);
  });

  it('holds 300 generated batches to docs/types.md and to one DuckDB over the same NDJSON', async () => {
    const seen = {
      accepted: 0,
      refused: 0,
      why: new Map<string, number>(),
      rows: 0,
      fixed: new Map<string, number>(),
      types: new Set<string>(),
    };
    const property = fc.asyncProperty(batchArb, async (batch) => {
      const table = `dx_${++tables}`;
      const show = (what: string) =>
        `${what}\n--- batch (table ${table}) ---\n${batch.ndjson}--- fields ---\n` +
        batch.fields.map((f) => `${f.name}: ${f.kind.name}${f.fixes ? '' : ' (witnesses did not fit)'}`).join('\n');
      const fail = (what: string): never => {
        throw new Error(show(what));
      };

      // What the rule says, as docs/types.md has it and as core/json-typing.ts does it.
      const expected = expectedColumns(batch.rows);
      let codeRefusal: TypingRefusal | undefined;
      try {
        const inference = new ColumnInference();
        for (const row of batch.rows) inference.add(toParsed(obj(row)) as Record<string, unknown>);
        inference.columns('ts');
      } catch (error) {
        if (!(error instanceof TypingRefusal)) throw error;
        codeRefusal = error;
      }
      if (Boolean(codeRefusal) !== expected.refused.size > 0)
        fail(
          `docs/types.md refuses ${JSON.stringify([...expected.refused])}; core/json-typing.ts ${codeRefusal ? `refuses: ${codeRefusal.message}` : 'accepts it'}`,
        );
      if (codeRefusal && !expected.refused.has(codeRefusal.field))
        fail(
          `core/json-typing.ts refuses "${codeRefusal.field}", docs/types.md ${JSON.stringify([...expected.refused])}`,
        );
      for (const field of batch.fields)
        if (
          field.fixes &&
          field.kind.fixed === REFUSED &&
          batch.rows.some((row) => row.some(([n]) => n === field.name))
        )
          if (
            ![...expected.refused].some(
              (r) => r === field.name || r.startsWith(`${field.name}.`) || r.startsWith(`${field.name}[`),
            )
          )
            fail(
              `field "${field.name}" (${field.kind.name}) must be refused; docs/types.md as written here refuses ${JSON.stringify([...expected.refused])}`,
            );

      const { status, body } = await ingest(table, batch.ndjson);
      if (expected.tsMissing) expected.refused.add('ts');
      if (expected.refused.size > 0) {
        seen.refused++;
        if (status < 400 || status >= 500)
          fail(`expected a 4xx naming ${[...expected.refused].join(' or ')}, got ${status}`);
        const message = body.message ?? '';
        const why =
          /only in case|differs from the table's column/.exec(message)?.[0] ??
          /more than 38 digits|not kept exactly|epoch numbers|is not a timestamp|have no "ts"|no "ts" column|takes ISO 8601/.exec(
            message,
          )?.[0] ??
          message;
        seen.why.set(why, (seen.why.get(why) ?? 0) + 1);
        if (![...expected.refused].some((field) => message.includes(`"${field}"`)))
          fail(`the refusal names none of ${JSON.stringify([...expected.refused])}: ${message}`);
        // Nothing of it committed: no table, and a query names it unknown.
        if ((await cluster.meta.findTable(table)) !== undefined) fail('a refused batch left its table behind');
        const after = await query(`SELECT count(*) FROM ${table}`);
        if (after.status !== 400 || !/unknown table/.test(after.body.message ?? ''))
          fail(`after the refusal, SELECT count(*) answered ${after.status}: ${JSON.stringify(after.body)}`);
        return;
      }
      seen.accepted++;
      seen.rows += batch.rows.length;
      if (status !== 200) fail(`expected the batch to be accepted, got ${status}: ${body.message}`);
      if (body.segment.rows !== batch.rows.length) fail(`${body.segment.rows} rows committed`);

      const file = path.join(dir, `${table}.ndjson`);
      await writeFile(file, batch.ndjson);
      const queries = queriesFor(table, expected.columns);
      const { columns: referenceColumns, answers: references } = await referenceAnswers(
        reference,
        file,
        table,
        expected.columns,
        queries,
      );
      await rm(file);
      const answers = [];
      for (const [i, sql] of queries.entries()) {
        const ref = references[i]!;
        const got = await query(sql);
        const both = `${sql}\n  Berth: ${got.status} ${JSON.stringify(got.status === 200 ? { types: got.body.types, rows: got.body.rows } : got.body.message)}\n  DuckDB: ${JSON.stringify('error' in ref ? ref.error : { types: ref.result.types, rows: ref.result.rows })}`;
        if ('error' in ref) {
          if (got.status < 400 || got.status >= 500) fail(`DuckDB refuses the query, Berth does not:\n${both}`);
          answers.push(undefined);
          continue;
        }
        if (got.status !== 200) fail(`Berth refuses the query, DuckDB answers:\n${both}`);
        const difference =
          resultDifference(got.body, ref.result, true) ??
          (JSON.stringify(got.body.rows) !== JSON.stringify(ref.result.rows) ? 'doubles differ' : undefined);
        if (difference) fail(`Berth and DuckDB differ: ${difference}\n${both}`);
        answers.push(got.body);
      }

      // The table's columns as meta keeps them (a result's types say VARCHAR for JSON) are docs/types.md's, as DuckDB spells them.
      const info = await cluster.meta.findTable(table);
      const tableColumns = (info?.columns ?? []).map(({ name, type }) => ({ name, type }));
      if (JSON.stringify(tableColumns) !== JSON.stringify(referenceColumns))
        fail(
          `the table's columns ${JSON.stringify(tableColumns)}\n  docs/types.md: ${JSON.stringify(referenceColumns)}`,
        );

      // Independently of both engines: the types a field's kind fixes, the instants, the JSON texts.
      const rows = answers[0]!;
      const names = expected.columns.map((c) => c.name);
      const typeOf = (name: string) => tableColumns[names.indexOf(name)]!.type;
      for (const { name } of expected.columns)
        seen.types.add(
          typeOf(name)
            .replace(/^STRUCT\(.*\)$/, 'STRUCT')
            .replace(/^.*\[\]$/, 'LIST'),
        );
      if (typeOf('seq') !== 'BIGINT' || typeOf('ts') !== 'TIMESTAMP' || rows.types[names.indexOf('ts')] !== 'TIMESTAMP')
        fail(`seq ${typeOf('seq')}, ts ${typeOf('ts')}`);
      for (const field of batch.fields) {
        const { fixed } = field.kind;
        if (!field.fixes || fixed === undefined || !names.includes(field.name)) continue;
        const type = typeOf(field.name);
        if (typeof fixed === 'string' ? type !== fixed : !fixed.test(type))
          fail(`field "${field.name}" (${field.kind.name}) is ${type}; docs/types.md: ${String(fixed)}`);
        const kindName = field.kind.name.replace(/^(objects|arrays) of .*/, '$1');
        seen.fixed.set(kindName, (seen.fixed.get(kindName) ?? 0) + 1);
      }
      const tsAt = names.indexOf('ts');
      const instants = rows.rows.map((row) => row[tsAt]);
      if (JSON.stringify(instants) !== JSON.stringify(batch.utc))
        fail(`ts answered ${JSON.stringify(instants)}, written as the instants ${JSON.stringify(batch.utc)}`);
      for (const [c, { name, type }] of expected.columns.entries()) {
        if (type !== 'JSON') continue;
        for (const [i, row] of batch.rows.entries()) {
          const want = row.find(([n]) => n === name)?.[1] ?? NULL;
          const got: JsonValue = rows.rows[i]![c]!;
          if (!sameJson(typeof got === 'string' ? parseJsonText(got) : got, want))
            fail(`JSON column "${name}", row ${i}: ${JSON.stringify(got)} is not the JSON text sent, ${toJson(want)}`);
        }
      }
    });
    const replay = fuzzReplay();
    const seed = replay.seed ?? Date.now() ^ (Math.random() * 2 ** 31);
    await fc.assert(property, {
      ...replay,
      seed,
      numRuns: 300,
      interruptAfterTimeLimit: 240_000,
      markInterruptAsFailure: true,
    });
    console.log(
      `[data-exactness] seed ${seed}: ${seen.accepted} batches accepted (${seen.rows} rows), ${seen.refused} refused ${JSON.stringify(Object.fromEntries(seen.why))}; ` +
        `column types ${[...seen.types].sort().join(', ')}; fixed kinds ${JSON.stringify(Object.fromEntries(seen.fixed))}`,
    );
    if (replay.path !== undefined) return; // a replay of one counterexample: it held
    // The generator reaches both outcomes and the rule's types: a drift into one would hide the rest.
    expect(seen.accepted).toBeGreaterThan(120);
    expect(seen.refused).toBeGreaterThan(50);
    for (const type of [
      'BIGINT',
      'UBIGINT',
      'DECIMAL(38,0)',
      'DOUBLE',
      'BOOLEAN',
      'VARCHAR',
      'TIMESTAMP',
      'DATE',
      'JSON',
      'STRUCT',
      'LIST',
    ])
      expect([...seen.types], type).toContain(type);
  }, 300_000);
});

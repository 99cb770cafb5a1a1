/**
 * DuckDB's types as PostgreSQL's: each column type an OID (and a type modifier for numeric), and
 * each value, as the coordinator answers it in JSON (result-json.ts: big integers and long
 * decimals as strings with every digit), in PostgreSQL's text format or, where a client asks for
 * it, its binary one. Integers past int8 and unsigned ones past their signed twin are numeric; a
 * STRUCT, a MAP or a nested list is json; a nanosecond timestamp is text, since PostgreSQL's keep
 * microseconds and Berth drops no digit.
 */
import type { JsonValue } from '../api.js';

export const OID = {
  bool: 16,
  bytea: 17,
  name: 19,
  int8: 20,
  int2: 21,
  int4: 23,
  text: 25,
  oid: 26,
  json: 114,
  float4: 700,
  float8: 701,
  unknown: 705,
  bpchar: 1042,
  varchar: 1043,
  date: 1082,
  time: 1083,
  timestamp: 1114,
  timestamptz: 1184,
  interval: 1186,
  timetz: 1266,
  varbit: 1562,
  numeric: 1700,
  uuid: 2950,
  jsonb: 3802,
} as const;

/** Each scalar type's array type. */
const ARRAY_OF: Record<number, number> = {
  [OID.bool]: 1000,
  [OID.bytea]: 1001,
  [OID.int2]: 1005,
  [OID.int4]: 1007,
  [OID.text]: 1009,
  [OID.int8]: 1016,
  [OID.float4]: 1021,
  [OID.float8]: 1022,
  [OID.date]: 1182,
  [OID.time]: 1183,
  [OID.timestamp]: 1115,
  [OID.timestamptz]: 1185,
  [OID.interval]: 1187,
  [OID.numeric]: 1231,
  [OID.uuid]: 2951,
  [OID.json]: 199,
  [OID.timetz]: 1270,
  [OID.varbit]: 1563,
};

/** A column's type for the client: its OID, size and modifier, and how its values are written. */
export interface PgColumnType {
  oid: number;
  size: number;
  modifier: number;
  text(value: JsonValue): string;
  /** Undefined where Berth has no binary form of the type: a client that asks gets an error. */
  binary?(value: JsonValue): Buffer;
}

const SCALARS: Record<string, number> = {
  BOOLEAN: OID.bool,
  TINYINT: OID.int2,
  SMALLINT: OID.int2,
  UTINYINT: OID.int2,
  INTEGER: OID.int4,
  USMALLINT: OID.int4,
  BIGINT: OID.int8,
  UINTEGER: OID.int8,
  UBIGINT: OID.numeric,
  HUGEINT: OID.numeric,
  UHUGEINT: OID.numeric,
  VARINT: OID.numeric,
  BIGNUM: OID.numeric,
  FLOAT: OID.float4,
  DOUBLE: OID.float8,
  VARCHAR: OID.text,
  BLOB: OID.bytea,
  DATE: OID.date,
  TIME: OID.time,
  'TIME WITH TIME ZONE': OID.timetz,
  TIMESTAMP: OID.timestamp,
  TIMESTAMP_S: OID.timestamp,
  TIMESTAMP_MS: OID.timestamp,
  'TIMESTAMP WITH TIME ZONE': OID.timestamptz,
  INTERVAL: OID.interval,
  UUID: OID.uuid,
  JSON: OID.json,
  BIT: OID.varbit,
};

const SIZES: Record<number, number> = {
  [OID.bool]: 1,
  [OID.int2]: 2,
  [OID.int4]: 4,
  [OID.int8]: 8,
  [OID.float4]: 4,
  [OID.float8]: 8,
  [OID.date]: 4,
  [OID.time]: 8,
  [OID.timestamp]: 8,
  [OID.timestamptz]: 8,
  [OID.interval]: 16,
  [OID.timetz]: 12,
  [OID.uuid]: 16,
};

/** The PostgreSQL type of a DuckDB column type, as DuckDB names it (`DECIMAL(18,3)`, `VARCHAR[]`). */
export function pgColumnType(duckdbType: string): PgColumnType {
  const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(duckdbType);
  if (decimal) {
    const scale = Number(decimal[2]);
    return { ...scalar(OID.numeric, scale), modifier: ((Number(decimal[1]) << 16) | scale) + 4 };
  }
  const list = /^(.*)\[\d*\]$/.exec(duckdbType);
  if (list) {
    const element = SCALARS[list[1]!] ?? (/^DECIMAL\(/.test(list[1]!) ? OID.numeric : undefined);
    const scale = Number(/,(\d+)\)$/.exec(list[1]!)?.[1] ?? 0);
    if (element !== undefined && ARRAY_OF[element]) return arrayType(scalar(element, scale), ARRAY_OF[element]);
    return scalar(OID.json);
  }
  if (/^(STRUCT|MAP|UNION)\(/.test(duckdbType)) return scalar(OID.json);
  const oid = SCALARS[duckdbType];
  return scalar(oid ?? OID.text);
}

function scalar(oid: number, scale = 0): PgColumnType {
  const text = TEXT[oid] ?? asText;
  return {
    oid,
    size: SIZES[oid] ?? -1,
    modifier: -1,
    text: oid === OID.numeric ? (v) => numericText(v, scale) : text,
    binary: oid === OID.numeric ? (v) => numericBinary(numericText(v, scale)) : BINARY[oid],
  };
}

const asText = (v: JsonValue): string => (typeof v === 'string' ? v : JSON.stringify(v));

/** A decimal's digits: a number keeps at most 15 significant digits (result-json.ts), written to its scale. */
function numericText(v: JsonValue, scale: number): string {
  if (typeof v === 'string') return v;
  const n = Number(v);
  return Math.abs(n) < 1e21 ? n.toFixed(scale) : String(v);
}

/** A double as PostgreSQL writes it: shortest exact digits, and the sign of a negative zero. */
function doubleText(v: JsonValue): string {
  if (typeof v === 'string') return v; // "NaN", "Infinity", "-Infinity"
  return Object.is(v, -0) ? '-0' : String(v);
}

/** A float's shortest digits as a float (DuckDB hands it over widened to a double). */
function floatText(v: JsonValue): string {
  if (typeof v !== 'number' || !Number.isFinite(v)) return doubleText(v);
  if (Object.is(v, -0)) return '-0';
  for (let digits = 1; digits < 10; digits++) {
    const text = v.toPrecision(digits);
    if (Math.fround(Number(text)) === v) return String(Number(text));
  }
  return String(v);
}

/** DuckDB writes a BLOB with its non-printable bytes as \xHH. */
function blobBytes(v: JsonValue): Buffer {
  const text = String(v);
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\\' && text[i + 1] === 'x') {
      bytes.push(parseInt(text.slice(i + 2, i + 4), 16));
      i += 3;
    } else bytes.push(text.charCodeAt(i));
  }
  return Buffer.from(bytes);
}

interface IntervalValue {
  months: number;
  days: number;
  micros: string | number;
}

function intervalText(v: JsonValue): string {
  const { months, days, micros } = v as unknown as IntervalValue;
  const parts: string[] = [];
  const years = Math.trunc(months / 12);
  const mons = months % 12;
  if (years) parts.push(`${years} year${Math.abs(years) === 1 ? '' : 's'}`);
  if (mons) parts.push(`${mons} mon${Math.abs(mons) === 1 ? '' : 's'}`);
  if (days) parts.push(`${days} day${Math.abs(days) === 1 ? '' : 's'}`);
  const us = BigInt(micros);
  if (us !== 0n || parts.length === 0) {
    const abs = us < 0n ? -us : us;
    const seconds = abs / 1_000_000n;
    const fraction = abs % 1_000_000n;
    const pad = (n: bigint) => String(n).padStart(2, '0');
    let clock = `${pad(seconds / 3600n)}:${pad((seconds / 60n) % 60n)}:${pad(seconds % 60n)}`;
    if (fraction) clock += `.${String(fraction).padStart(6, '0').replace(/0+$/, '')}`;
    parts.push(`${us < 0n ? '-' : ''}${clock}`);
  }
  return parts.join(' ');
}

const TEXT: Record<number, (v: JsonValue) => string> = {
  [OID.bool]: (v) => (v ? 't' : 'f'),
  [OID.int2]: String,
  [OID.int4]: String,
  [OID.int8]: String,
  [OID.float4]: floatText,
  [OID.float8]: doubleText,
  [OID.bytea]: (v) => `\\x${blobBytes(v).toString('hex')}`,
  [OID.interval]: intervalText,
};

const int = (bytes: 2 | 4 | 8) => (v: JsonValue) => {
  const b = Buffer.allocUnsafe(bytes);
  if (bytes === 8) b.writeBigInt64BE(BigInt(v as number | string));
  else if (bytes === 4) b.writeInt32BE(Number(v));
  else b.writeInt16BE(Number(v));
  return b;
};

const PG_EPOCH_MS = Date.UTC(2000, 0, 1);
const MICROS_PER_DAY = 86_400_000_000n;

/** Microseconds since 2000-01-01 of DuckDB's `YYYY-MM-DD HH:MM:SS[.f][+HH[:MM]]`. */
function timestampMicros(text: string): bigint {
  if (text === 'infinity') return 0x7fffffffffffffffn;
  if (text === '-infinity') return -0x8000000000000000n;
  const m = /^(-?\d+)-(\d\d)-(\d\d)(?: (\d\d):(\d\d):(\d\d)(?:\.(\d+))?)?(?:([+-])(\d\d)(?::?(\d\d))?)?$/.exec(text);
  if (!m) throw new Error(`not a timestamp: ${text}`);
  const date = new Date(0);
  date.setUTCFullYear(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  const days = BigInt(Math.round((date.getTime() - PG_EPOCH_MS) / 86_400_000));
  const seconds = BigInt(Number(m[4] ?? 0) * 3600 + Number(m[5] ?? 0) * 60 + Number(m[6] ?? 0));
  const fraction = BigInt((m[7] ?? '').padEnd(6, '0').slice(0, 6) || '0');
  const offset = m[8] ? BigInt((m[8] === '-' ? -1 : 1) * (Number(m[9]) * 3600 + Number(m[10] ?? 0) * 60)) : 0n;
  return days * MICROS_PER_DAY + (seconds - offset) * 1_000_000n + fraction;
}

function timeMicros(text: string): bigint {
  const m = /^(\d\d):(\d\d):(\d\d)(?:\.(\d+))?/.exec(text);
  if (!m) throw new Error(`not a time: ${text}`);
  const seconds = BigInt(Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3]));
  return seconds * 1_000_000n + BigInt((m[4] ?? '').padEnd(6, '0').slice(0, 6) || '0');
}

const int64 = (n: bigint) => {
  const b = Buffer.allocUnsafe(8);
  b.writeBigInt64BE(n);
  return b;
};

const BINARY: Record<number, (v: JsonValue) => Buffer> = {
  [OID.bool]: (v) => Buffer.from([v ? 1 : 0]),
  [OID.int2]: int(2),
  [OID.int4]: int(4),
  [OID.int8]: int(8),
  [OID.float4]: (v) => {
    const b = Buffer.allocUnsafe(4);
    b.writeFloatBE(Number(v));
    return b;
  },
  [OID.float8]: (v) => {
    const b = Buffer.allocUnsafe(8);
    b.writeDoubleBE(Number(v));
    return b;
  },
  [OID.text]: (v) => Buffer.from(asText(v)),
  [OID.json]: (v) => Buffer.from(asText(v)),
  [OID.bytea]: blobBytes,
  [OID.uuid]: (v) => Buffer.from(String(v).replace(/-/g, ''), 'hex'),
  [OID.date]: (v) => {
    const b = Buffer.allocUnsafe(4);
    const text = String(v);
    b.writeInt32BE(
      text === 'infinity'
        ? 0x7fffffff
        : text === '-infinity'
          ? -0x80000000
          : Number(timestampMicros(text) / MICROS_PER_DAY),
    );
    return b;
  },
  [OID.timestamp]: (v) => int64(timestampMicros(String(v))),
  [OID.timestamptz]: (v) => int64(timestampMicros(String(v))),
  [OID.time]: (v) => int64(timeMicros(String(v))),
  [OID.interval]: (v) => {
    const { months, days, micros } = v as unknown as IntervalValue;
    const b = Buffer.allocUnsafe(16);
    b.writeBigInt64BE(BigInt(micros), 0);
    b.writeInt32BE(days, 8);
    b.writeInt32BE(months, 12);
    return b;
  },
};

/** numeric's binary form: base-10000 digits, the weight of the first, a sign and the display scale. */
function numericBinary(text: string): Buffer {
  const header = (ndigits: number, weight: number, sign: number, dscale: number) => {
    const b = Buffer.allocUnsafe(8 + ndigits * 2);
    b.writeInt16BE(ndigits, 0);
    b.writeInt16BE(weight, 2);
    b.writeUInt16BE(sign, 4);
    b.writeInt16BE(dscale, 6);
    return b;
  };
  if (text === 'NaN') return header(0, 0, 0xc000, 0);
  const negative = text.startsWith('-');
  const [whole = '', fraction = ''] = text.replace(/^[-+]/, '').split('.');
  const intPart = whole.replace(/^0+/, '');
  const padInt = intPart.padStart(Math.ceil(intPart.length / 4) * 4, '0');
  const padFrac = fraction.padEnd(Math.ceil(fraction.length / 4) * 4, '0');
  let groups = [...(padInt.match(/.{4}/g) ?? []), ...(padFrac.match(/.{4}/g) ?? [])].map(Number);
  let weight = padInt.length / 4 - 1;
  while (groups.length > 0 && groups[0] === 0) {
    groups.shift();
    weight--;
  }
  while (groups.length > 0 && groups[groups.length - 1] === 0) groups.pop();
  if (groups.length === 0) weight = 0;
  const b = header(groups.length, weight, negative && groups.length > 0 ? 0x4000 : 0, fraction.length);
  groups.forEach((g, i) => b.writeInt16BE(g, 8 + i * 2));
  groups = [];
  return b;
}

/** An array element as PostgreSQL's array text writes it: quoted where it would be misread. */
function arrayElement(text: string): string {
  if (text === '' || /[{}",\\\s]/.test(text) || /^null$/i.test(text))
    return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
  return text;
}

function arrayType(element: PgColumnType, oid: number): PgColumnType {
  const items = (v: JsonValue) => v as JsonValue[];
  const elementBinary = element.binary;
  return {
    oid,
    size: -1,
    modifier: -1,
    text: (v) =>
      `{${items(v)
        .map((e) => (e === null ? 'NULL' : arrayElement(element.text(e))))
        .join(',')}}`,
    binary:
      elementBinary &&
      ((v) => {
        const values = items(v);
        const head = Buffer.allocUnsafe(20);
        head.writeInt32BE(1, 0);
        head.writeInt32BE(values.some((e) => e === null) ? 1 : 0, 4);
        head.writeInt32BE(element.oid, 8);
        head.writeInt32BE(values.length, 12);
        head.writeInt32BE(1, 16);
        const parts = values.map((e) => {
          if (e === null) return int(4)(-1);
          const bytes = elementBinary(e);
          return Buffer.concat([int(4)(bytes.length), bytes]);
        });
        return Buffer.concat([head, ...parts]);
      }),
  };
}

/** The DuckDB type a parameter of a PostgreSQL type is cast to; undefined: left a string literal, typed by its use. */
export function parameterDuckDBType(oid: number, text: string): string | undefined {
  switch (oid) {
    case OID.bool:
      return 'BOOLEAN';
    case OID.int2:
      return 'SMALLINT';
    case OID.int4:
      return 'INTEGER';
    case OID.int8:
      return 'BIGINT';
    case OID.float4:
      return 'FLOAT';
    case OID.float8:
      return 'DOUBLE';
    case OID.text:
    case OID.varchar:
    case OID.bpchar:
    case OID.name:
      return 'VARCHAR';
    case OID.bytea:
      return 'BLOB';
    case OID.date:
      return 'DATE';
    case OID.time:
      return 'TIME';
    case OID.timestamp:
      return 'TIMESTAMP';
    case OID.timestamptz:
      return 'TIMESTAMPTZ';
    case OID.interval:
      return 'INTERVAL';
    case OID.uuid:
      return 'UUID';
    case OID.json:
    case OID.jsonb:
      return 'JSON';
    case OID.numeric: {
      // The narrowest exact decimal: every digit the client sent, no more.
      const [whole = '', fraction = ''] = text.replace(/^[-+]/, '').split('.');
      const digits = whole.replace(/^0+/, '').length + fraction.length;
      if (!/^[-+]?\d*(\.\d*)?$/.test(text) || digits > 38) return undefined;
      return `DECIMAL(${Math.max(digits, 1, fraction.length)},${fraction.length})`;
    }
    default:
      return undefined;
  }
}

/** A parameter sent in binary, as the text its type's cast reads. */
export function parameterText(oid: number, bytes: Buffer): string {
  const need = (n: number) => {
    if (bytes.length !== n) throw new Error(`a binary parameter of type ${oid} has ${bytes.length} bytes, not ${n}`);
  };
  switch (oid) {
    case OID.bool:
      need(1);
      return bytes[0] ? 'true' : 'false';
    case OID.int2:
      need(2);
      return String(bytes.readInt16BE());
    case OID.int4:
      need(4);
      return String(bytes.readInt32BE());
    case OID.int8:
      need(8);
      return String(bytes.readBigInt64BE());
    case OID.float4:
      need(4);
      return floatText(bytes.readFloatBE());
    case OID.float8:
      need(8);
      return doubleText(bytes.readDoubleBE());
    case OID.bytea:
      return [...bytes].map((b) => `\\x${b.toString(16).padStart(2, '0')}`).join('');
    case OID.uuid:
      need(16);
      return bytes.toString('hex').replace(/^(.{8})(.{4})(.{4})(.{4})/, '$1-$2-$3-$4-');
    case OID.date: {
      need(4);
      return new Date(PG_EPOCH_MS + bytes.readInt32BE() * 86_400_000).toISOString().slice(0, 10);
    }
    case OID.timestamp:
    case OID.timestamptz: {
      need(8);
      const micros = bytes.readBigInt64BE();
      const ms = Number(micros / 1000n);
      const rest = String(((micros % 1_000_000n) + 1_000_000n) % 1_000_000n).padStart(6, '0');
      const iso = new Date(PG_EPOCH_MS + ms - (ms % 1000) - (micros < 0n && ms % 1000 !== 0 ? 1000 : 0)).toISOString();
      return `${iso.slice(0, 10)} ${iso.slice(11, 19)}.${rest}${oid === OID.timestamptz ? '+00' : ''}`;
    }
    case OID.numeric:
      return numericFromBinary(bytes);
    case OID.jsonb:
      return bytes.subarray(1).toString('utf8');
    default:
      return bytes.toString('utf8');
  }
}

function numericFromBinary(bytes: Buffer): string {
  const ndigits = bytes.readInt16BE(0);
  const weight = bytes.readInt16BE(2);
  const sign = bytes.readUInt16BE(4);
  const dscale = bytes.readInt16BE(6);
  if (sign === 0xc000) return 'NaN';
  const groups = Array.from({ length: ndigits }, (_, i) => String(bytes.readInt16BE(8 + i * 2)).padStart(4, '0'));
  let whole = '';
  for (let w = 0; w <= weight; w++) whole += groups[w] ?? '0000';
  let fraction = '';
  for (let i = Math.max(weight + 1, 0); i < ndigits; i++) fraction += groups[i];
  if (weight < -1) fraction = '0000'.repeat(-weight - 1) + fraction;
  whole = whole.replace(/^0+/, '') || '0';
  fraction = fraction.padEnd(dscale, '0').slice(0, dscale);
  return `${sign === 0x4000 ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}

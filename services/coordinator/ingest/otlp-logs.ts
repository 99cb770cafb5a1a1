/**
 * OTLP logs in (ExportLogsServiceRequest, protobuf or JSON), rows of a logs table out: one row a
 * log record, its resource and scope flattened beside it (the mapping: docs/concepts.md "Log
 * shippers"). Protobuf is decoded by the official OTLP definitions as OpenTelemetry's own
 * transformer package compiles them; JSON is read as OTLP/JSON defines it (lowerCamelCase names,
 * ids in hex, 64-bit integers as strings or numbers, kept digit for digit).
 *
 * Attributes become MAP(VARCHAR, VARCHAR): `attributes['http.route']` reads one in DuckDB without
 * parsing (JSON would parse every row, and a dotted key needs quoting in a JSON path), and Parquet
 * stores a map exactly. A value keeps its text exactly: an integer its digits, a double its
 * shortest round-trip text, arrays and key-value lists their JSON.
 */
import { createRequire } from 'node:module';
import { parse as parseLossless } from 'lossless-json';
import { badRequest } from '../../common/errors.js';
import type { ColumnSpec } from '../../meta/client.js';

/** The generated code of the OTLP protos (protobufjs static code), as @opentelemetry/otlp-transformer ships it. */
interface Message<T> {
  decode(bytes: Uint8Array): object;
  toObject(message: object, options: object): T;
  encode(message: object): { finish(): Uint8Array };
}
const root = createRequire(import.meta.url)('@opentelemetry/otlp-transformer/build/src/generated/root.js') as {
  opentelemetry: {
    proto: {
      collector: {
        logs: { v1: { ExportLogsServiceRequest: Message<ExportRequest>; ExportLogsServiceResponse: Message<object> } };
      };
      logs: { v1: { SeverityNumber: Record<string, number> } };
    };
  };
};
const { ExportLogsServiceRequest, ExportLogsServiceResponse } = root.opentelemetry.proto.collector.logs.v1;
const { SeverityNumber } = root.opentelemetry.proto.logs.v1;

// ── the request, as OTLP/JSON spells it (and protobuf's toObject, 64-bit integers as strings) ──

type Int64 = string | number;
interface AnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: Int64;
  doubleValue?: number | string;
  arrayValue?: { values?: AnyValue[] };
  kvlistValue?: { values?: KeyValue[] };
  bytesValue?: string;
}
interface KeyValue {
  key?: string;
  value?: AnyValue;
}
interface LogRecord {
  timeUnixNano?: Int64;
  observedTimeUnixNano?: Int64;
  severityNumber?: number | string;
  severityText?: string;
  body?: AnyValue;
  attributes?: KeyValue[];
  flags?: number | string;
  traceId?: string;
  spanId?: string;
}
interface ExportRequest {
  resourceLogs?: {
    resource?: { attributes?: KeyValue[] };
    scopeLogs?: { scope?: { name?: string; version?: string; attributes?: KeyValue[] }; logRecords?: LogRecord[] }[];
  }[];
}

/** The logs table's timestamp column. */
export const LOGS_TIMESTAMP_COLUMN = 'timestamp';

/** The columns of a logs table, as DuckDB spells their types. */
export const LOGS_COLUMNS: ColumnSpec[] = [
  { name: LOGS_TIMESTAMP_COLUMN, type: 'TIMESTAMP' },
  { name: 'time_unix_nano', type: 'UBIGINT' },
  { name: 'observed_time_unix_nano', type: 'UBIGINT' },
  { name: 'severity_number', type: 'INTEGER' },
  { name: 'severity_text', type: 'VARCHAR' },
  { name: 'body', type: 'VARCHAR' },
  { name: 'attributes', type: 'MAP(VARCHAR, VARCHAR)' },
  { name: 'trace_id', type: 'VARCHAR' },
  { name: 'span_id', type: 'VARCHAR' },
  { name: 'flags', type: 'UINTEGER' },
  { name: 'service_name', type: 'VARCHAR' },
  { name: 'resource_attributes', type: 'MAP(VARCHAR, VARCHAR)' },
  { name: 'scope_name', type: 'VARCHAR' },
  { name: 'scope_version', type: 'VARCHAR' },
  { name: 'scope_attributes', type: 'MAP(VARCHAR, VARCHAR)' },
];

/** The table an export lands in when its request names none (header X-Berth-Table). */
export const DEFAULT_LOGS_TABLE = 'otel_logs';

export type OtlpEncoding = 'protobuf' | 'json';

/** Thrown for a body that is not an ExportLogsServiceRequest. */
const notOtlp = (why: string) => badRequest('invalid_otlp', `not an OTLP ExportLogsServiceRequest: ${why}`);

/** Decodes an export request; a body that is not one is a 400 saying where it broke. */
export function decodeExportRequest(body: Buffer, encoding: OtlpEncoding): { request: ExportRequest; hexIds: boolean } {
  if (encoding === 'protobuf') {
    let message: object;
    try {
      message = ExportLogsServiceRequest.decode(body);
    } catch (error) {
      throw notOtlp((error as Error).message);
    }
    // 64-bit integers as their digits, bytes as base64 (ids are read back to hex below).
    const request = ExportLogsServiceRequest.toObject(message, { longs: String, bytes: String, enums: Number });
    return { request, hexIds: false };
  }
  let parsed: unknown;
  try {
    parsed = parseLossless(body.toString('utf8'), null, (digits) => digits);
  } catch (error) {
    throw notOtlp(`the JSON does not parse (${(error as Error).message})`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw notOtlp('the JSON is not an object');
  return { request: parsed as ExportRequest, hexIds: true };
}

/** The response: empty, or partial_success with the records refused and why. */
export function encodeExportResponse(encoding: OtlpEncoding, rejected: number, errorMessage: string): Buffer | object {
  const response = rejected > 0 ? { partialSuccess: { rejectedLogRecords: rejected, errorMessage } } : {};
  if (encoding === 'json')
    return rejected > 0 ? { partialSuccess: { rejectedLogRecords: String(rejected), errorMessage } } : {};
  return Buffer.from(ExportLogsServiceResponse.encode(response).finish());
}

// ── rows ──

const list = <T>(value: T[] | undefined, what: string): T[] => {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw notOtlp(`${what} is not a list`);
  return value;
};

const text = (value: unknown, what: string): string | undefined => {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw notOtlp(`${what} is not a string`);
  return value;
};

/** A 64-bit unsigned integer's value (0 when absent). */
const unsigned = (value: Int64 | undefined, what: string): bigint => {
  if (value === undefined || value === null) return 0n;
  if (!/^\d+$/.test(String(value))) throw notOtlp(`${what} is not an unsigned integer`);
  const n = BigInt(value);
  if (n >= 2n ** 64n) throw notOtlp(`${what} is past 2^64`);
  return n;
};

const hexId = (value: string | undefined, hexIds: boolean, bytes: number, what: string): string | undefined => {
  const given = text(value, what);
  if (given === undefined) return undefined;
  const hex = hexIds ? given.toLowerCase() : Buffer.from(given, 'base64').toString('hex');
  if (!new RegExp(`^[0-9a-f]{${bytes * 2}}$`).test(hex)) throw notOtlp(`${what} is not ${bytes} bytes`);
  return hex;
};

/** A scalar AnyValue's text: a string as it is, an integer its digits, a double its shortest text, bytes in base64. */
function scalarText(value: AnyValue, what: string): string | undefined {
  if (value.stringValue !== undefined) return String(value.stringValue);
  if (value.boolValue !== undefined) return String(value.boolValue === true || String(value.boolValue) === 'true');
  if (value.intValue !== undefined) {
    if (!/^-?\d+$/.test(String(value.intValue))) throw notOtlp(`${what}: intValue is not an integer`);
    return BigInt(value.intValue).toString();
  }
  if (value.doubleValue !== undefined) {
    const double = Number(value.doubleValue);
    if (Number.isNaN(double) && String(value.doubleValue) !== 'NaN')
      throw notOtlp(`${what}: doubleValue is not a number`);
    return String(double);
  }
  if (value.bytesValue !== undefined) return String(value.bytesValue);
  return undefined;
}

/** An AnyValue as JSON: integers by their digits (however long), non-finite doubles and bytes as strings. */
function jsonOf(value: AnyValue | undefined, what: string): string {
  if (value === undefined || value === null) return 'null';
  const scalar = scalarText(value, what);
  if (scalar !== undefined) {
    const bare = value.boolValue !== undefined || value.intValue !== undefined;
    return bare || (value.doubleValue !== undefined && Number.isFinite(Number(scalar)))
      ? scalar
      : JSON.stringify(scalar);
  }
  if (value.arrayValue !== undefined)
    return `[${list(value.arrayValue?.values, `${what}.arrayValue.values`)
      .map((item, i) => jsonOf(item, `${what}[${i}]`))
      .join(',')}]`;
  if (value.kvlistValue !== undefined) return mapJson(value.kvlistValue?.values, what, (v, w) => jsonOf(v, w));
  return 'null';
}

/** An AnyValue as text: a scalar's text, a list's or key-value list's JSON, NULL for an empty value. */
const textOf = (value: AnyValue | undefined, what: string): string | null => {
  if (value === undefined || value === null) return null;
  const scalar = scalarText(value, what);
  if (scalar !== undefined) return scalar;
  const json = jsonOf(value, what);
  return json === 'null' ? null : json;
};

/** JavaScript objects treat this key specially; ingest refuses it, so a record carrying it is refused. */
const PROTO = '__proto__';

/** Thrown for one record that cannot be a row (the rest of the export goes on). */
class RecordRefused extends Error {}

/** Key-value pairs as a JSON object (a later key replaces an earlier one, as a map keeps one value a key). */
function mapJson(
  pairs: KeyValue[] | undefined,
  what: string,
  valueJson: (v: AnyValue | undefined, what: string) => string,
) {
  const values = new Map<string, string>();
  for (const [i, pair] of list(pairs, what).entries()) {
    const key = text(pair?.key, `${what}[${i}].key`) ?? '';
    if (key === PROTO) throw new RecordRefused(`${what} has a key named ${PROTO}, which Berth refuses`);
    values.set(key, valueJson(pair?.value, `${what}.${key}`));
  }
  return `{${[...values].map(([key, json]) => `${JSON.stringify(key)}:${json}`).join(',')}}`;
}

/** Attributes as a MAP(VARCHAR, VARCHAR)'s JSON: each value as text. */
const attributesJson = (pairs: KeyValue[] | undefined, what: string) =>
  mapJson(pairs, what, (value, w) => JSON.stringify(textOf(value, w)));

/** An instant in nanoseconds as the ISO 8601 text of its microsecond (the TIMESTAMP column's precision). */
function isoMicros(nanos: bigint): string {
  const ms = nanos / 1_000_000n;
  const micros = (nanos / 1_000n) % 1_000n;
  return `${new Date(Number(ms)).toISOString().slice(0, -1)}${micros.toString().padStart(3, '0')}Z`;
}

const severityOf = (value: number | string | undefined, what: string): number | null => {
  if (value === undefined || value === null) return null;
  const n = typeof value === 'string' && !/^\d+$/.test(value) ? SeverityNumber[value] : Number(value);
  if (n === undefined || !Number.isInteger(n) || n < 0 || n > 2 ** 31 - 1)
    throw notOtlp(`${what} is not a severity number`);
  return n === 0 ? null : n;
};

/** The rows of an export, one NDJSON line a record, and the records refused with the first reason. */
export function logRows(
  request: ExportRequest,
  hexIds: boolean,
): { ndjson: Buffer; rows: number; rejected: number; firstRejection: string } {
  const lines: string[] = [];
  let rejected = 0;
  let firstRejection = '';
  for (const [r, resourceLogs] of list(request.resourceLogs, 'resourceLogs').entries()) {
    const at = `resourceLogs[${r}]`;
    const resourceAttributes = resourceLogs?.resource?.attributes;
    for (const [s, scopeLogs] of list(resourceLogs?.scopeLogs, `${at}.scopeLogs`).entries()) {
      const scopeAt = `${at}.scopeLogs[${s}]`;
      const scope = scopeLogs?.scope;
      for (const [l, record] of list(scopeLogs?.logRecords, `${scopeAt}.logRecords`).entries()) {
        const recordAt = `${scopeAt}.logRecords[${l}]`;
        try {
          lines.push(rowOf(record, recordAt, hexIds, resourceAttributes, scope, at, scopeAt));
        } catch (error) {
          if (!(error instanceof RecordRefused)) throw error;
          rejected++;
          firstRejection ||= `${recordAt}: ${error.message}`;
        }
      }
    }
  }
  return {
    ndjson: Buffer.from(lines.map((line) => `${line}\n`).join('')),
    rows: lines.length,
    rejected,
    firstRejection,
  };
}

function rowOf(
  record: LogRecord,
  at: string,
  hexIds: boolean,
  resourceAttributes: KeyValue[] | undefined,
  scope: { name?: string; version?: string; attributes?: KeyValue[] } | undefined,
  resourceAt: string,
  scopeAt: string,
): string {
  if (record === null || typeof record !== 'object') throw notOtlp(`${at} is not a log record`);
  const time = unsigned(record.timeUnixNano, `${at}.timeUnixNano`);
  const observed = unsigned(record.observedTimeUnixNano, `${at}.observedTimeUnixNano`);
  if (time === 0n && observed === 0n)
    throw new RecordRefused('it has neither timeUnixNano nor observedTimeUnixNano: a row needs a time');
  const service = list(resourceAttributes, `${resourceAt}.resource.attributes`).find(
    (kv) => kv?.key === 'service.name',
  );
  const flags = record.flags === undefined || record.flags === null ? 0 : Number(record.flags);
  if (!Number.isInteger(flags) || flags < 0 || flags > 2 ** 32 - 1)
    throw notOtlp(`${at}.flags is not a 32-bit unsigned integer`);
  const fields: [string, string][] = [
    [LOGS_TIMESTAMP_COLUMN, JSON.stringify(isoMicros(time === 0n ? observed : time))],
    ['time_unix_nano', time === 0n ? 'null' : time.toString()],
    ['observed_time_unix_nano', observed === 0n ? 'null' : observed.toString()],
    ['severity_number', JSON.stringify(severityOf(record.severityNumber, `${at}.severityNumber`))],
    ['severity_text', JSON.stringify(text(record.severityText, `${at}.severityText`) ?? null)],
    ['body', JSON.stringify(textOf(record.body, `${at}.body`))],
    ['attributes', attributesJson(record.attributes, `${at}.attributes`)],
    ['trace_id', JSON.stringify(hexId(record.traceId, hexIds, 16, `${at}.traceId`) ?? null)],
    ['span_id', JSON.stringify(hexId(record.spanId, hexIds, 8, `${at}.spanId`) ?? null)],
    ['flags', String(flags)],
    ['service_name', JSON.stringify(service ? textOf(service.value, 'service.name') : null)],
    ['resource_attributes', attributesJson(resourceAttributes, `${resourceAt}.resource.attributes`)],
    ['scope_name', JSON.stringify(text(scope?.name, `${scopeAt}.scope.name`) ?? null)],
    ['scope_version', JSON.stringify(text(scope?.version, `${scopeAt}.scope.version`) ?? null)],
    ['scope_attributes', attributesJson(scope?.attributes, `${scopeAt}.scope.attributes`)],
  ];
  return `{${fields.map(([name, json]) => `"${name}":${json}`).join(',')}}`;
}

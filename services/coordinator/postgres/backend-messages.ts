/** Encodes what the server sends a PostgreSQL client (protocol 3.0): one function per message. */

/** A column as RowDescription describes it. */
export interface FieldDescription {
  name: string;
  typeOid: number;
  typeSize: number;
  typeModifier: number;
  /** 0 text, 1 binary. */
  format: number;
}

/** The fields of an ErrorResponse or NoticeResponse. */
export interface Diagnostic {
  severity: 'ERROR' | 'FATAL' | 'NOTICE' | 'WARNING';
  code: string;
  message: string;
  detail?: string;
  hint?: string;
}

function message(type: string, body: Buffer): Buffer {
  const out = Buffer.allocUnsafe(5 + body.length);
  out.write(type, 0, 'latin1');
  out.writeInt32BE(4 + body.length, 1);
  body.copy(out, 5);
  return out;
}

const cstring = (s: string) => Buffer.from(`${s}\0`, 'utf8');
const int32 = (n: number) => {
  const b = Buffer.allocUnsafe(4);
  b.writeInt32BE(n);
  return b;
};
const int16 = (n: number) => {
  const b = Buffer.allocUnsafe(2);
  b.writeInt16BE(n);
  return b;
};

export const authenticationOk = () => message('R', int32(0));
export const authenticationCleartext = () => message('R', int32(3));
export const authenticationSasl = (mechanisms: string[]) =>
  message('R', Buffer.concat([int32(10), ...mechanisms.map(cstring), Buffer.from([0])]));
export const authenticationSaslContinue = (data: string) => message('R', Buffer.concat([int32(11), Buffer.from(data)]));
export const authenticationSaslFinal = (data: string) => message('R', Buffer.concat([int32(12), Buffer.from(data)]));
export const parameterStatus = (name: string, value: string) =>
  message('S', Buffer.concat([cstring(name), cstring(value)]));
export const backendKeyData = (processId: number, secretKey: number) =>
  message('K', Buffer.concat([int32(processId), int32(secretKey)]));
/** `status`: I idle, T in a transaction block, E in a failed one. */
export const readyForQuery = (status: 'I' | 'T' | 'E') => message('Z', Buffer.from(status));
export const parseComplete = () => message('1', Buffer.alloc(0));
export const bindComplete = () => message('2', Buffer.alloc(0));
export const closeComplete = () => message('3', Buffer.alloc(0));
export const noData = () => message('n', Buffer.alloc(0));
export const portalSuspended = () => message('s', Buffer.alloc(0));
export const emptyQueryResponse = () => message('I', Buffer.alloc(0));
export const commandComplete = (tag: string) => message('C', cstring(tag));
/** The start of COPY's output, every column in text. */
export const copyOutResponse = (columns: number) =>
  message('H', Buffer.concat([Buffer.from([0]), int16(columns), ...Array.from({ length: columns }, () => int16(0))]));
export const copyData = (line: string) => message('d', Buffer.from(line, 'utf8'));
export const copyDone = () => message('c', Buffer.alloc(0));
export const parameterDescription = (oids: number[]) =>
  message('t', Buffer.concat([int16(oids.length), ...oids.map((oid) => int32(oid | 0))]));

export function rowDescription(fields: FieldDescription[]): Buffer {
  const parts = [int16(fields.length)];
  for (const f of fields) {
    const fixed = Buffer.allocUnsafe(18);
    fixed.writeInt32BE(0, 0); // table oid
    fixed.writeInt16BE(0, 4); // column number
    fixed.writeInt32BE(f.typeOid | 0, 6);
    fixed.writeInt16BE(f.typeSize, 10);
    fixed.writeInt32BE(f.typeModifier, 12);
    fixed.writeInt16BE(f.format, 16);
    parts.push(cstring(f.name), fixed);
  }
  return message('T', Buffer.concat(parts));
}

/** One row: each value already encoded in its column's format, null for NULL. */
export function dataRow(values: (Buffer | null)[]): Buffer {
  let length = 2;
  for (const v of values) length += 4 + (v?.length ?? 0);
  const out = Buffer.allocUnsafe(5 + length);
  out.write('D', 0, 'latin1');
  out.writeInt32BE(4 + length, 1);
  out.writeInt16BE(values.length, 5);
  let at = 7;
  for (const v of values) {
    out.writeInt32BE(v === null ? -1 : v.length, at);
    at += 4;
    if (v) at += v.copy(out, at);
  }
  return out;
}

function diagnostic(type: 'E' | 'N', d: Diagnostic): Buffer {
  const fields: [string, string | undefined][] = [
    ['S', d.severity],
    ['V', d.severity],
    ['C', d.code],
    ['M', d.message],
    ['D', d.detail],
    ['H', d.hint],
  ];
  const parts = fields.filter(([, v]) => v !== undefined).map(([k, v]) => Buffer.from(`${k}${v}\0`, 'utf8'));
  return message(type, Buffer.concat([...parts, Buffer.from([0])]));
}

export const errorResponse = (d: Diagnostic) => diagnostic('E', d);
export const noticeResponse = (d: Diagnostic) => diagnostic('N', d);

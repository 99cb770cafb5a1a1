/**
 * Reads what a PostgreSQL client sends (protocol 3.0): the untyped startup packets, then typed
 * messages, each cut out of the socket's bytes by its length and decoded into a plain object.
 *
 * The codec is written here rather than taken from a library: node-postgres' `pg-protocol`
 * decodes the server's messages and encodes the client's (the opposite direction), and
 * `pg-gateway` is pre-1.0 with an API that changed between its 0.2 and 0.3 lines and owns the
 * socket loop, which is where Berth's limits, backpressure and cancellation have to live. The
 * framing itself is a length prefix and a dozen message layouts.
 */

/** Thrown when a client's bytes break the protocol: the connection gets an error and is closed. */
export class ProtocolViolation extends Error {
  override name = 'ProtocolViolation';
}

export const PROTOCOL_3 = 196608;
export const SSL_REQUEST = 80877103;
export const GSSENC_REQUEST = 80877104;
export const CANCEL_REQUEST = 80877102;

export type StartupPacket =
  | { kind: 'startup'; parameters: Map<string, string> }
  | { kind: 'ssl' }
  | { kind: 'gssenc' }
  | { kind: 'cancel'; processId: number; secretKey: number };

export type FrontendMessage =
  | { type: 'query'; sql: string }
  | { type: 'parse'; name: string; sql: string; parameterTypes: number[] }
  | {
      type: 'bind';
      portal: string;
      statement: string;
      parameterFormats: number[];
      parameters: (Buffer | null)[];
      resultFormats: number[];
    }
  | { type: 'describe'; target: 'S' | 'P'; name: string }
  | { type: 'execute'; portal: string; maxRows: number }
  | { type: 'close'; target: 'S' | 'P'; name: string }
  | { type: 'sync' }
  | { type: 'flush' }
  | { type: 'terminate' }
  | { type: 'password'; data: Buffer }
  | { type: 'copy'; code: string };

/** A cursor over one message's body that refuses to read past it. */
class Body {
  private at = 0;
  constructor(private readonly bytes: Buffer) {}

  private need(n: number): void {
    if (n < 0 || this.at + n > this.bytes.length) throw new ProtocolViolation('a message is shorter than its fields');
  }
  int16(): number {
    this.need(2);
    const v = this.bytes.readInt16BE(this.at);
    this.at += 2;
    return v;
  }
  int32(): number {
    this.need(4);
    const v = this.bytes.readInt32BE(this.at);
    this.at += 4;
    return v;
  }
  byte(): string {
    this.need(1);
    return String.fromCharCode(this.bytes[this.at++]!);
  }
  cstring(): string {
    const end = this.bytes.indexOf(0, this.at);
    if (end < 0) throw new ProtocolViolation('a string field has no terminator');
    const s = this.bytes.toString('utf8', this.at, end);
    this.at = end + 1;
    return s;
  }
  bytesOf(n: number): Buffer {
    this.need(n);
    const b = this.bytes.subarray(this.at, this.at + n);
    this.at += n;
    return b;
  }
  rest(): Buffer {
    return this.bytes.subarray(this.at);
  }
  /** A count of items each at least `size` bytes: a count the body cannot hold is a lie. */
  count(size: number): number {
    const n = this.int16();
    if (n < 0 || n * size > this.bytes.length - this.at)
      throw new ProtocolViolation('a count is larger than its message');
    return n;
  }
}

export function decodeStartup(body: Buffer): StartupPacket {
  const b = new Body(body);
  const code = b.int32();
  if (code === SSL_REQUEST) return { kind: 'ssl' };
  if (code === GSSENC_REQUEST) return { kind: 'gssenc' };
  if (code === CANCEL_REQUEST) return { kind: 'cancel', processId: b.int32(), secretKey: b.int32() };
  if (code !== PROTOCOL_3)
    throw new ProtocolViolation(`unsupported protocol ${code >> 16}.${code & 0xffff}: Berth speaks 3.0`);
  const parameters = new Map<string, string>();
  for (;;) {
    const name = b.cstring();
    if (name === '') break;
    parameters.set(name, b.cstring());
  }
  return { kind: 'startup', parameters };
}

export function decodeMessage(type: string, body: Buffer): FrontendMessage {
  const b = new Body(body);
  switch (type) {
    case 'Q':
      return { type: 'query', sql: b.cstring() };
    case 'P': {
      const name = b.cstring();
      const sql = b.cstring();
      const parameterTypes = Array.from({ length: b.count(4) }, () => b.int32() >>> 0);
      return { type: 'parse', name, sql, parameterTypes };
    }
    case 'B': {
      const portal = b.cstring();
      const statement = b.cstring();
      const parameterFormats = Array.from({ length: b.count(2) }, () => b.int16());
      const parameters = Array.from({ length: b.count(4) }, () => {
        const length = b.int32();
        return length === -1 ? null : b.bytesOf(length);
      });
      const resultFormats = Array.from({ length: b.count(2) }, () => b.int16());
      return { type: 'bind', portal, statement, parameterFormats, parameters, resultFormats };
    }
    case 'D':
    case 'C': {
      const target = b.byte();
      if (target !== 'S' && target !== 'P') throw new ProtocolViolation(`no such object kind "${target}"`);
      return { type: type === 'D' ? 'describe' : 'close', target, name: b.cstring() };
    }
    case 'E':
      return { type: 'execute', portal: b.cstring(), maxRows: b.int32() };
    case 'S':
      return { type: 'sync' };
    case 'H':
      return { type: 'flush' };
    case 'X':
      return { type: 'terminate' };
    case 'p':
      return { type: 'password', data: b.rest() };
    case 'd':
    case 'c':
    case 'f':
      return { type: 'copy', code: type };
    default:
      throw new ProtocolViolation(`unknown message type 0x${type.charCodeAt(0).toString(16)}`);
  }
}

/**
 * Cuts a byte stream into packets: first untyped ones (a length, then the body) while `startup`,
 * then typed ones. Refuses a length below its own size or above `maxBytes`, before buffering it.
 */
export class MessageReader {
  private chunks: Buffer[] = [];
  private size = 0;
  /** Untyped packets until the startup is over. */
  startup = true;

  constructor(public maxBytes: number) {}

  /** Bytes received and not yet read as packets. */
  get buffered(): number {
    return this.size;
  }

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
  }

  /** The next whole packet, or undefined until more bytes arrive. */
  next(): { type: string; body: Buffer } | undefined {
    const header = this.startup ? 4 : 5;
    if (this.size < header) return undefined;
    const head = this.peek(header);
    const type = this.startup ? '' : String.fromCharCode(head[0]!);
    const length = head.readInt32BE(this.startup ? 0 : 1);
    const min = 4;
    if (length < min || length > this.maxBytes)
      throw new ProtocolViolation(`a message of ${length} bytes (the limit is ${this.maxBytes})`);
    const total = length + (this.startup ? 0 : 1);
    if (this.size < total) return undefined;
    const whole = this.take(total);
    return { type, body: whole.subarray(header) };
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.length < n) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0]!.subarray(0, n);
  }

  private take(n: number): Buffer {
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    this.chunks = all.length > n ? [all.subarray(n)] : [];
    this.size -= n;
    return all.subarray(0, n);
  }
}

/**
 * NDJSON's line rule (services/common/ndjson-lines.ts), which ingest, `berth ingest` and `berth query`
 * share: a line ends at \n and nowhere else, whatever the Node version's readline does.
 */
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ndjsonLines } from '../services/common/ndjson-lines.js';

async function linesOf(input: Readable): Promise<string[]> {
  const lines: string[] = [];
  for await (const line of ndjsonLines(input)) lines.push(line);
  return lines;
}

describe('the lines of an NDJSON stream', () => {
  it('keeps a row whole when its strings hold U+2028 and U+2029, as JSON.stringify leaves them', async () => {
    const rows = [{ note: 'line\u2028separator' }, { note: 'paragraph\u2029separator' }, { note: 'next\u0085line' }];
    const text = rows.map((row) => JSON.stringify(row)).join('\n') + '\n';
    expect(text).toContain('\u2028');
    expect((await linesOf(Readable.from([text]))).map((line) => JSON.parse(line) as unknown)).toEqual(rows);
  });

  it('takes CRLF line ends and a last line without one, and joins a character split across chunks', async () => {
    const bytes = Buffer.from('{"a":1}\r\n{"名前":"😀"}\n{"a":3}');
    const chunks = [...bytes].map((byte) => Buffer.from([byte]));
    expect(await linesOf(Readable.from(chunks))).toEqual(['{"a":1}', '{"名前":"😀"}', '{"a":3}']);
  });

  it('keeps a row of 8 MiB whole, read in 64 KiB chunks, and the rows around it', async () => {
    const long = JSON.stringify({ note: 'é'.repeat(4 * 1024 * 1024) });
    const bytes = Buffer.from(`{"a":1}\n${long}\r\n{"a":2}\n`);
    const chunks = Array.from({ length: Math.ceil(bytes.length / 65_536) }, (_, i) =>
      bytes.subarray(i * 65_536, (i + 1) * 65_536),
    );
    const lines = await linesOf(Readable.from(chunks));
    expect(lines.map((line) => line.length)).toEqual([7, long.length, 7]);
    expect(lines[1]).toBe(long);
  });

  it("ends with the input's error instead of waiting for more lines", async () => {
    const input = new Readable({ read() {} });
    input.push('{"a":1}\n');
    setImmediate(() => input.destroy(new Error('connection reset')));
    await expect(linesOf(input)).rejects.toThrow('connection reset');
  });
});

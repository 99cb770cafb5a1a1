/**
 * The lines of an NDJSON stream, as NDJSON defines them: split at \n (a \r before it dropped),
 * and nowhere else. Not node:readline, which also splits at a lone \r and (Node 24 here, not
 * Node 20) at U+2028 and U+2029: JSON.stringify leaves those two raw inside strings, so a valid
 * row would come apart into two broken lines. Nor split2, which splits its whole pending text
 * again with every chunk: a row of many megabytes would take time quadratic in its length.
 *
 * Bytes are split before they are decoded: a \n byte is never part of a UTF-8 character, and a
 * line is decoded once, whole, however its bytes were chunked. Only the new chunk is searched.
 */
import type { Readable } from 'node:stream';

const NEWLINE = 0x0a;
const CARRIAGE_RETURN = 0x0d;

const decode = (bytes: Buffer): string =>
  (bytes.at(-1) === CARRIAGE_RETURN ? bytes.subarray(0, -1) : bytes).toString('utf8');

export async function* ndjsonLines(input: Readable): AsyncGenerator<string> {
  /** The start of the line the chunks so far have not ended. */
  let pending: Buffer[] = [];
  for await (const data of input) {
    const chunk = typeof data === 'string' ? Buffer.from(data) : (data as Buffer);
    let start = 0;
    for (let end = chunk.indexOf(NEWLINE); end !== -1; end = chunk.indexOf(NEWLINE, start)) {
      pending.push(chunk.subarray(start, end));
      yield decode(pending.length === 1 ? pending[0]! : Buffer.concat(pending));
      pending = [];
      start = end + 1;
    }
    if (start < chunk.length) pending.push(chunk.subarray(start));
  }
  if (pending.length > 0) yield decode(Buffer.concat(pending));
}

/**
 * The lines of an NDJSON stream, as NDJSON defines them: split at \n (a \r before it dropped),
 * and nowhere else. Not node:readline, which also splits at a lone \r and (Node 24 here, not Node 20) at
 * U+2028 and U+2029: JSON.stringify leaves those two raw inside strings, so a valid row would
 * come apart into two broken lines.
 */
import { pipeline, type Readable } from 'node:stream';
import split2 from 'split2';

export function ndjsonLines(input: Readable): AsyncIterable<string> {
  // pipeline, not pipe: an error of the input (a file that cannot be read, a connection reset)
  // ends the iteration with that error instead of leaving it waiting for more lines.
  return pipeline(input, split2(), () => {});
}

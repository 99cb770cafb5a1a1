/**
 * Byte limits for request bodies that handlers stream (pushed segments, NDJSON batches). Fastify
 * enforces bodyLimit only on bodies it parses itself, so streamed ones are counted here.
 */
import type { FastifyRequest } from 'fastify';
import { Readable, Transform } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { DomainError } from './errors.js';

const tooLarge = (limit: number, what = 'the body') =>
  new DomainError('too_large', 'body_too_large', `${what} exceeds the limit of ${limit} bytes`);

/** The request body as a stream that fails with a 413 once it passes `limit` bytes. */
export function limitedBody(request: FastifyRequest, limit: number): Readable {
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    (request.body as Readable).resume();
    throw tooLarge(limit);
  }
  return (request.body as Readable).pipe(byteLimit(limit));
}

/**
 * The request body decoded by its Content-Encoding (gzip or none), failing with a 413 once it
 * passes `limit` bytes either as sent or decoded (a small gzip body may unpack to gigabytes), and
 * with a 415 for an encoding it does not know.
 */
export function decodedBody(request: FastifyRequest, limit: number): Readable {
  const encoding = (request.headers['content-encoding'] ?? 'identity').toLowerCase().trim();
  if (encoding !== 'gzip' && encoding !== 'identity') {
    (request.body as Readable).resume();
    throw new DomainError(
      'unsupported',
      'unsupported_encoding',
      `Content-Encoding "${encoding}" is not taken: send gzip or none`,
    );
  }
  const sent = limitedBody(request, limit);
  if (encoding === 'identity') return sent;
  const gunzip = createGunzip();
  // A body that is not gzip is the client's fault: a 400, not a failed stream.
  const decoded = sent.pipe(gunzip).pipe(byteLimit(limit, 'the decompressed body'));
  sent.on('error', (error) => decoded.destroy(error));
  gunzip.on('error', (error) =>
    decoded.destroy(
      error instanceof DomainError
        ? error
        : new DomainError('invalid', 'invalid_gzip', `the body is not valid gzip: ${error.message}`),
    ),
  );
  return decoded;
}

/** Passes bytes through until more than `limit` have passed, then fails with a 413. */
function byteLimit(limit: number, what?: string): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      seen += chunk.length;
      callback(seen > limit ? tooLarge(limit, what) : null, chunk);
    },
  });
}

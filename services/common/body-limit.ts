/**
 * Byte limits for request bodies that handlers stream (pushed segments, NDJSON batches, shippers'
 * compressed batches). Fastify enforces bodyLimit only on bodies it parses itself, so streamed
 * ones are counted here.
 */
import type { FastifyRequest } from 'fastify';
import { Readable, Transform } from 'node:stream';
import { createGunzip, createInflate } from 'node:zlib';
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
 * The request body decoded by its Content-Encoding (gzip, deflate or none, as clients and log
 * shippers send it), failing with a 413 once it passes `limit` bytes either as sent or decoded (a
 * small compressed body may unpack to gigabytes), with a 400 for a body that is not what its
 * encoding says, and with a 415 for an encoding it does not know.
 */
export function decodedBody(request: FastifyRequest, limit: number): Readable {
  const encoding = (request.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  const decompress =
    encoding === 'gzip' || encoding === 'x-gzip'
      ? createGunzip()
      : encoding === 'deflate'
        ? createInflate()
        : encoding === 'identity' || encoding === ''
          ? undefined
          : null;
  if (decompress === null) {
    (request.body as Readable).resume();
    throw new DomainError(
      'unsupported',
      'unsupported_encoding',
      `Content-Encoding "${encoding}" is not supported: send the body as it is, gzip or deflate`,
    );
  }
  const sent = limitedBody(request, limit);
  if (!decompress) return sent;
  const decoded = sent.pipe(decompress).pipe(byteLimit(limit, 'the decompressed body'));
  sent.on('error', (error) => decoded.destroy(error));
  decompress.on('error', (error) =>
    decoded.destroy(
      error instanceof DomainError
        ? error
        : new DomainError('invalid', 'bad_encoding', `the body is not valid ${encoding}: ${error.message}`),
    ),
  );
  return decoded;
}

/** The whole request body, decoded as decodedBody decodes it, in memory: for bodies a handler reads whole. */
export async function wholeBody(request: FastifyRequest, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of decodedBody(request, limit) as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks);
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

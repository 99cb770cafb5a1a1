/**
 * Byte limits for request bodies that handlers stream (pushed segments, NDJSON batches). Fastify
 * enforces bodyLimit only on bodies it parses itself, so streamed ones are counted here.
 */
import type { FastifyRequest } from 'fastify';
import { Readable, Transform } from 'node:stream';
import { DomainError } from './errors.js';

const tooLarge = (limit: number) =>
  new DomainError('too_large', 'body_too_large', `the body exceeds the limit of ${limit} bytes`);

/** The request body as a stream that fails with a 413 once it passes `limit` bytes. */
export function limitedBody(request: FastifyRequest, limit: number): Readable {
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    (request.body as Readable).resume();
    throw tooLarge(limit);
  }
  let seen = 0;
  return (request.body as Readable).pipe(
    new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        seen += chunk.length;
        callback(seen > limit ? tooLarge(limit) : null, chunk);
      },
    }),
  );
}

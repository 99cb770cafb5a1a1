/**
 * Berth's domain errors, and the one place they become HTTP answers. The store, the cache, the
 * planner and the scatter throw a DomainError: a code callers branch on (`segment_retired`,
 * `no_backend`…) and a kind that says what sort of failure it is; only the error handler every
 * service installs turns a kind into a status.
 */
import type { FastifyError, FastifyInstance } from 'fastify';

/**
 * What sort of failure a domain error is. `inconsistent`: stored data disagrees with itself (a
 * segment's file and its table's schema), which is no request's fault and which no retry mends.
 */
export type ErrorKind =
  | 'invalid'
  | 'not_found'
  | 'conflict'
  | 'too_large'
  | 'gone'
  | 'unsupported'
  | 'inconsistent'
  | 'upstream_failed'
  | 'unavailable';

/** The HTTP status each kind is answered with. */
export const HTTP_STATUS: Record<ErrorKind, number> = {
  invalid: 400,
  not_found: 404,
  conflict: 409,
  too_large: 413,
  gone: 410,
  unsupported: 415,
  inconsistent: 500,
  upstream_failed: 502,
  unavailable: 503,
};

/** Thrown when a request cannot be served as asked: its code says which rule it broke, its message what to do. */
export class DomainError extends Error {
  override name = 'DomainError';
  constructor(
    readonly kind: ErrorKind,
    readonly code: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * Thrown by the HTTP layer itself (deadlines, a client gone, admission): an answer with its
 * status, code and headers, e.g. Retry-After.
 */
export class HttpError extends Error {
  override name = 'HttpError';
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    /** Headers to answer with, e.g. Retry-After. */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const badRequest = (code: string, message: string) => new DomainError('invalid', code, message);
export const notFound = (code: string, message: string) => new DomainError('not_found', code, message);
export const conflict = (code: string, message: string) => new DomainError('conflict', code, message);
export const unavailable = (code: string, message: string) => new DomainError('unavailable', code, message);
export const inconsistent = (code: string, message: string) => new DomainError('inconsistent', code, message);
/** A result past the configured cap (BERTH_MAX_RESULT_BYTES), saying how to shrink it. */
export const resultTooLarge = (limit: number) =>
  new DomainError(
    'too_large',
    'result_too_large',
    `the result is larger than the limit of ${limit} bytes (BERTH_MAX_RESULT_BYTES): aggregate, filter or add a LIMIT`,
  );

/** The status, code and message an error is answered with; undefined for a failure that is not the request's (a 5xx the log explains). */
export function httpAnswerOf(
  error: unknown,
): { status: number; code: string; message: string; headers: Record<string, string> } | undefined {
  if (error instanceof DomainError)
    return { status: HTTP_STATUS[error.kind], code: error.code, message: error.message, headers: {} };
  if (error instanceof HttpError)
    return { status: error.statusCode, code: error.code, message: error.message, headers: error.headers };
  return undefined;
}

/** 4xx errors and Berth's own errors say what was wrong; other failures are logged in full and answered without internals. */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const answer = httpAnswerOf(error);
    // Data that disagrees with itself is answered as it is, and an operator must hear of it too.
    if (error instanceof DomainError && error.kind === 'inconsistent') request.log.error({ err: error }, error.message);
    if (answer)
      return reply.code(answer.status).headers(answer.headers).send({ error: answer.code, message: answer.message });
    const status = error.statusCode ?? 500;
    if (status >= 500) {
      request.log.error({ err: error }, 'request failed');
      return reply.code(status).send({ error: 'internal', message: 'internal error; see the service log' });
    }
    return reply.code(status).send({ error: (error.code ?? 'bad_request').toLowerCase(), message: error.message });
  });
}

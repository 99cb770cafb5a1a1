/** Errors a handler throws to answer with a 4xx, and the one error handler every service installs. */
import type { FastifyError, FastifyInstance } from 'fastify';

/** Thrown when a request cannot be served as asked; becomes an HTTP answer with its status and code. */
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

export const badRequest = (code: string, message: string) => new HttpError(400, code, message);
export const notFound = (code: string, message: string) => new HttpError(404, code, message);
export const conflict = (code: string, message: string) => new HttpError(409, code, message);
/** A result past the configured cap (BERTH_MAX_RESULT_BYTES): a 413 that says how to shrink it. */
export const resultTooLarge = (limit: number) =>
  new HttpError(413, 'result_too_large', `the result is larger than the limit of ${limit} bytes (BERTH_MAX_RESULT_BYTES): aggregate, filter or add a LIMIT`);

/** 4xx errors and Berth's own HttpErrors say what was wrong; other failures are logged in full and answered without internals. */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | HttpError, request, reply) => {
    const status = error.statusCode ?? 500;
    if (status >= 500 && !(error instanceof HttpError)) {
      request.log.error({ err: error }, 'request failed');
      return reply.code(status).send({ error: 'internal', message: 'internal error; see the service log' });
    }
    const code = error instanceof HttpError ? error.code : (error.code ?? 'bad_request').toLowerCase();
    if (error instanceof HttpError) reply.headers(error.headers);
    return reply.code(status).send({ error: code, message: error.message });
  });
}

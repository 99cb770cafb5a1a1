/**
 * The console's gate: a session cookie for everything past the login page, and for a request that
 * changes something also proof that the console's own page sent it (CSRF): its Origin is this
 * server's, and an API call carries a header no other site's page may send without CORS.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sessionOf, type Sessions } from './session.js';

/** The header the console's fetches add to every API call. */
export const CONSOLE_HEADER = 'x-berth-console';

/** Whether the request came from a page of this server (a browser always sends Origin on a POST). */
export function sameOrigin(request: FastifyRequest): boolean {
  const origin = request.headers.origin;
  if (!origin) return false;
  try {
    return new URL(origin).host === request.headers.host;
  } catch {
    return false;
  }
}

export const hasSession = (sessions: Sessions, request: FastifyRequest) =>
  sessions.valid(sessionOf(request.headers.cookie));

/** An onRequest hook for the console's API: 401 without a session, 403 for a cross-site change. */
export function requireSession(sessions: Sessions) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (!hasSession(sessions, request)) {
      await reply.code(401).send({ error: 'unauthorized', message: 'log in to the console first' });
      return;
    }
    if (request.method !== 'GET' && (request.headers[CONSOLE_HEADER] !== '1' || !sameOrigin(request)))
      await reply.code(403).send({ error: 'forbidden', message: 'not sent by the console' });
  };
}

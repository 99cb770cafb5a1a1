/** The shared bearer token that guards every mutating endpoint between services. */
import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** Compares two strings in time that does not depend on where they differ. */
export const sameText = (given: string, expected: string): boolean => {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
};

/** A fastify onRequest hook that answers 401 unless the request carries `Authorization: Bearer <token>`. */
export function requireToken(token: string) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (!sameText(request.headers.authorization ?? '', `Bearer ${token}`)) {
      await reply
        .code(401)
        .send({ error: 'unauthorized', message: 'a valid bearer token is required for this endpoint' });
    }
  };
}

/**
 * Whether an Authorization header carries `token` as log shippers send a credential: a bearer
 * token, or the password of HTTP basic auth under any user name (Vector, Fluent Bit, Logstash and
 * Filebeat have a user and a password for Elasticsearch, and only some of them a header).
 */
export function carriesToken(authorization: string | undefined, token: string): boolean {
  const [scheme = '', credential = ''] = (authorization ?? '').split(' ', 2);
  if (scheme.toLowerCase() === 'bearer') return sameText(credential, token);
  if (scheme.toLowerCase() !== 'basic') return false;
  const decoded = Buffer.from(credential, 'base64').toString('utf8');
  return sameText(decoded.slice(decoded.indexOf(':') + 1), token) && decoded.includes(':');
}

/** The header a caller sends with the shared token. */
export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

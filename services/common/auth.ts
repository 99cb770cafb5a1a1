/** The shared bearer token that guards every mutating endpoint between services. */
import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** A fastify onRequest hook that answers 401 unless the request carries `Authorization: Bearer <token>`. */
export function requireToken(token: string) {
  const expected = Buffer.from(`Bearer ${token}`);
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const given = Buffer.from(request.headers.authorization ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      await reply
        .code(401)
        .send({ error: 'unauthorized', message: 'a valid bearer token is required for this endpoint' });
    }
  };
}

/** The header a caller sends with the shared token. */
export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

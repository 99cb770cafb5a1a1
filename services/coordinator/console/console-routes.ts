/**
 * The console at /console/: the login page for anyone, the page and its API for a session only.
 * The page itself is built by scripts/build-console.mjs into dist/console (npm run build).
 */
import { readFile } from 'node:fs/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { consoleApi, type ConsoleApiOptions } from './console-api.js';
import { hasSession, sameOrigin } from './guard.js';
import { loginPage } from './login-page.js';
import { sessionCookie, sessionOf, Sessions } from './session.js';

/** Where the build puts the page: dist/console, from dist/services/coordinator/console/. */
const BUILT = new URL('../../../console/', import.meta.url);

/** The built files, each with its type; app.css is public (the login page uses it), the rest need a session. */
const FILES: Record<string, { type: string; public?: boolean }> = {
  'index.html': { type: 'text/html; charset=utf-8' },
  'app.js': { type: 'text/javascript; charset=utf-8' },
  'app.css': { type: 'text/css; charset=utf-8', public: true },
};

/** No inline script or style, no framing, nothing sent elsewhere. */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  // same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on the login form's POST.
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
};

export type ConsoleOptions = Omit<ConsoleApiOptions, 'sessions'>;

export async function consoleRoutes(app: FastifyInstance, options: ConsoleOptions): Promise<void> {
  const sessions = new Sessions(options.token);
  app.addHook('onSend', async (_request, reply) => {
    reply.headers(SECURITY_HEADERS);
  });
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: 4096 },
    (_request, body, done) => done(null, Object.fromEntries(new URLSearchParams(body as string))),
  );

  const sendFile = async (reply: FastifyReply, name: string) => {
    const file = FILES[name]!;
    const body = await readFile(new URL(name, BUILT)).catch(() => undefined);
    if (!body)
      return reply.code(503).type('text/plain').send('the console is not built: run `npm run build` (dist/console)');
    return reply.type(file.type).send(body);
  };
  const login = (reply: FastifyReply, status = 200, failure?: string) =>
    reply.code(status).type('text/html; charset=utf-8').send(loginPage(failure));

  app.get('/console', async (_request, reply) => reply.redirect('/console/'));
  // Where a failed login's page was posted: reloaded or bookmarked, it is the console again.
  app.get('/console/login', async (_request, reply) => reply.redirect('/console/'));
  // The page for a session, else the login page: without a session nothing else is shown.
  app.get('/console/', async (request, reply) =>
    hasSession(sessions, request) ? sendFile(reply, 'index.html') : login(reply),
  );
  app.get('/console/:file', async (request: FastifyRequest<{ Params: { file: string } }>, reply) => {
    const { file } = request.params;
    if (!Object.hasOwn(FILES, file)) return reply.code(404).send({ error: 'not_found', message: 'no such file' });
    if (!FILES[file]!.public && !hasSession(sessions, request))
      return reply.code(401).send({ error: 'unauthorized', message: 'log in to the console first' });
    return sendFile(reply, file);
  });

  app.post(
    '/console/login',
    async (request: FastifyRequest<{ Body: { token?: string } | undefined }>, reply: FastifyReply) => {
      if (!sameOrigin(request)) return login(reply, 403, 'This form must be sent from the console’s own page.');
      const id = sessions.login(String(request.body?.token ?? '').trim());
      if (!id) return login(reply, 401, 'That is not the cluster’s token.');
      return reply.header('set-cookie', sessionCookie(id, request.protocol === 'https')).redirect('/console/', 303);
    },
  );
  app.post('/console/logout', async (request, reply) => {
    if (!sameOrigin(request)) return reply.code(403).send({ error: 'forbidden', message: 'not sent by the console' });
    sessions.logout(sessionOf(request.headers.cookie));
    return reply.header('set-cookie', sessionCookie('', request.protocol === 'https', 0)).redirect('/console/', 303);
  });

  await app.register(consoleApi, { ...options, sessions, prefix: '/console/api' });
}

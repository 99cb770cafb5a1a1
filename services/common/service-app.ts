/**
 * The fastify instance each service's app starts from: pino logging under the service's name, the
 * one error handler, TypeBox types, a limit on the bodies fastify parses, and GET /healthz. Each
 * app.ts adds only its own routes (and its /metrics with `serveMetrics`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Registry } from 'prom-client';
import { installErrorHandler } from './errors.js';
import { loggerOptions } from './logger.js';
import { answers, Ok } from './schemas.js';

export interface ServiceAppOptions {
  /** Largest body fastify parses itself, in bytes (bodies a handler streams are counted by body-limit.ts). */
  bodyLimit: number;
  /** Log GET /healthz only when it fails: for a service that is polled every few seconds. */
  quietHealth?: boolean;
  /** Options for fastify's schema validator (the controller's bodies are strict). */
  ajv?: FastifyServerOptions['ajv'];
  /** @default true */
  logger?: boolean;
}

export function createServiceApp(service: string, options: ServiceAppOptions) {
  const app = Fastify({
    logger: options.logger === false ? false : loggerOptions(service),
    bodyLimit: options.bodyLimit,
    ...(options.ajv ? { ajv: options.ajv } : {}),
  }).withTypeProvider<TypeBoxTypeProvider>();
  installErrorHandler(app);
  closeEachConnectionOnceIdle(app);
  app.get(
    '/healthz',
    { ...(options.quietHealth ? { logLevel: 'warn' as const } : {}), schema: { response: answers(Ok) } },
    async () => ({ ok: true as const }),
  );
  return app;
}

/**
 * While the app closes, each connection is ended as soon as its last answer is out. Fastify closes
 * only the connections idle when it starts to close: one busy then (a final stage's streamed
 * answer) would otherwise stay open in the client's agent until the keep-alive timeout (72 s),
 * past any grace period, and the process would be killed instead of exiting. Each socket is
 * ended on its own, after its bytes: other answers still going out are left alone.
 */
function closeEachConnectionOnceIdle(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  const answering = new WeakMap<Socket, number>();
  app.server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    answering.set(socket, (answering.get(socket) ?? 0) + 1);
    response.once('close', () => {
      const left = answering.get(socket)! - 1;
      answering.set(socket, left);
      if (closing && left === 0) socket.end();
    });
  });
}

/** GET /metrics: the figures in `registry`, after `refresh` when the figures are read at each scrape. */
export function serveMetrics(app: FastifyInstance, registry: Registry, refresh?: () => Promise<void>): void {
  app.get('/metrics', async (_request, reply) => {
    if (refresh) await refresh();
    return reply.type(registry.contentType).send(await registry.metrics());
  });
}

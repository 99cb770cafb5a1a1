/** The coordinator's HTTP API: SQL, ingest, members, workload groups, health and metrics. */
import Fastify, { type FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { Type } from 'typebox';
import { requireToken } from '../common/auth.js';
import { limitedBody } from '../common/body-limit.js';
import { installErrorHandler } from '../common/errors.js';
import { loggerOptions } from '../common/logger.js';
import type { MemberView } from '../common/member-view.js';
import { TableName } from '../common/schemas.js';
import type { MetaClient } from '../meta/client.js';
import type { Ingestor } from './ingest.js';
import type { QueryService } from './query-service.js';

export interface CoordinatorAppOptions {
  queries: QueryService;
  ingestor: Ingestor;
  meta: MetaClient;
  view: MemberView;
  token: string;
  /** Largest NDJSON batch one ingest call takes. @default 256 MiB */
  maxIngestBytes?: number;
  /** @default true */
  logger?: boolean;
}

export function buildCoordinatorApp(options: CoordinatorAppOptions): FastifyInstance {
  const app = Fastify({ logger: options.logger === false ? false : loggerOptions('coordinator'), bodyLimit: 1 << 20 }).withTypeProvider<TypeBoxTypeProvider>();
  installErrorHandler(app);
  const { queries, meta, view } = options;
  const registry = new Registry();
  const queryCount = new Counter({ name: 'berth_queries_total', help: 'Queries answered, by route and verdict', labelNames: ['route', 'verdict'], registers: [registry] });
  const queryTime = new Histogram({ name: 'berth_query_seconds', help: 'Query latency, by route and verdict', labelNames: ['route', 'verdict'], registers: [registry] });
  new Gauge({
    name: 'berth_workload_queries',
    help: 'Queries running and waiting per workload group (the heavy pool: over every coordinator)',
    labelNames: ['group', 'state'],
    registers: [registry],
    async collect() {
      for (const g of await queries.workload()) for (const state of ['running', 'waiting'] as const) this.set({ group: g.name, state }, g[state]);
    },
  });

  // NDJSON streams to a scratch file instead of being buffered.
  app.addContentTypeParser(['application/x-ndjson', 'application/jsonl'], (_request, payload, done) => done(null, payload));

  app.get('/healthz', async () => ({ ok: true }));
  app.get('/readyz', async (_request, reply) => {
    const members = view.members?.length ?? 0;
    const metaDown = await meta.ping().then(
      () => undefined,
      (error: Error) => error.message,
    );
    const ready = members > 0 && !metaDown;
    return reply.code(ready ? 200 : 503).send({ ready, members, ...(metaDown ? { reason: metaDown } : {}) });
  });
  app.get('/metrics', async (_request, reply) => reply.type(registry.contentType).send(await registry.metrics()));

  app.post(
    '/v1/query',
    { schema: { body: Type.Object({ sql: Type.String({ minLength: 1, maxLength: 100_000 }) }, { additionalProperties: false }) } },
    async (request, reply) => {
      // A query stops on every node (and a heavy one leaves the pool's line) when its client goes away.
      const gone = new AbortController();
      reply.raw.once('close', () => {
        if (!reply.raw.writableFinished) gone.abort();
      });
      const result = await queries.query(request.body.sql, gone.signal);
      const labels = { route: result.stats.route, verdict: result.stats.verdict.class };
      queryCount.inc(labels);
      queryTime.observe(labels, result.stats.elapsedMs / 1000);
      request.log.info({ stats: result.stats }, 'query answered');
      return result;
    },
  );

  app.post(
    '/v1/tables/:table/rows',
    {
      onRequest: requireToken(options.token),
      schema: {
        params: Type.Object({ table: TableName }),
        querystring: Type.Object({ timestampColumn: Type.Optional(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]{0,62}$' })) }),
      },
    },
    async (request, reply) => {
      try {
        return await options.ingestor.ingest(request.params.table, limitedBody(request, options.maxIngestBytes ?? 256 * 1024 * 1024), request.query.timestampColumn);
      } catch (error) {
        // A batch refused mid-stream leaves the rest of its body unread on the connection: close it.
        reply.header('connection', 'close');
        throw error;
      }
    },
  );

  app.get('/v1/tables', async () => ({ tables: await meta.listTables() }));

  app.get('/v1/nodes', async () => {
    const backends = await meta.backends();
    const members = view.members ?? [];
    const totalWeight = members.reduce((sum, m) => sum + m.weight, 0);
    return {
      nodes: backends.map((b) => {
        const member = members.find((m) => m.id === b.id);
        return { ...b, weight: b.cpuCores, share: member && totalWeight > 0 ? member.weight / totalWeight : 0 };
      }),
    };
  });

  app.get('/v1/workload-groups', async () => ({ groups: await queries.workload() }));

  return app;
}

/**
 * The meta service: node registry with heartbeats, members, SHOW BACKENDS, the segment manifest and
 * leases. It keeps no state of its own beyond its store: over PostgreSQL any number of replicas
 * serve the same API.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { requireToken } from '../common/auth.js';
import { installErrorHandler, notFound } from '../common/errors.js';
import { loggerOptions } from '../common/logger.js';
import { GroupName, NodeId, SegmentId, SegmentSchema, TableName, TimestampColumn } from '../common/schemas.js';
import type { MetaStore } from './store.js';

export interface MetaAppOptions {
  store: MetaStore;
  /** Bearer token required on every mutating endpoint. */
  token: string;
  /** Most vCPUs a node may declare: a node's weight is its share of the data, so an absurd claim would take it all. @default 1024 */
  maxVcpus?: number;
  /** @default true */
  logger?: boolean;
}

const LeaseName = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$' });

export function buildMetaApp(options: MetaAppOptions): FastifyInstance {
  const app = Fastify({ logger: options.logger === false ? false : loggerOptions('meta'), bodyLimit: 1 << 20 }).withTypeProvider<TypeBoxTypeProvider>();
  installErrorHandler(app);
  const { store } = options;
  const auth = { onRequest: requireToken(options.token) };
  const Vcpus = Type.Number({ exclusiveMinimum: 0, maximum: options.maxVcpus ?? 1024 });
  // Heartbeats and member polls arrive every few seconds from every node: log them only when they fail.
  const quiet = { logLevel: 'warn' as const };

  app.get('/healthz', quiet, async () => ({ ok: true }));
  // Ready while the store answers: a replica that lost its database leaves the load balancer's rotation.
  app.get('/readyz', quiet, async () => {
    await store.ping();
    return { ok: true };
  });

  // ── nodes ──
  app.post(
    '/v1/nodes',
    {
      ...auth,
      schema: {
        body: Type.Object(
          { id: NodeId, group: GroupName, url: Type.String({ pattern: '^https?://', maxLength: 500 }), vcpus: Vcpus, startedAt: Type.Integer({ minimum: 0 }) },
          { additionalProperties: false },
        ),
      },
    },
    async (request) => {
      await store.registerNode(request.body);
      return { ok: true };
    },
  );

  app.post(
    '/v1/nodes/:id/heartbeat',
    { ...auth, ...quiet, schema: { params: Type.Object({ id: NodeId }), body: Type.Object({ vcpus: Vcpus }, { additionalProperties: false }) } },
    async (request) => {
      if (!(await store.heartbeat(request.params.id, request.body.vcpus))) {
        throw notFound('unknown_node', `node "${request.params.id}" is not registered; register again`);
      }
      return { ok: true };
    },
  );

  app.delete('/v1/nodes/:id', { ...auth, schema: { params: Type.Object({ id: NodeId }) } }, async (request) => ({ removed: await store.deregisterNode(request.params.id) }));

  app.get('/v1/groups/:group/members', { ...quiet, schema: { params: Type.Object({ group: GroupName }) } }, async (request) => ({
    group: request.params.group,
    members: await store.members(request.params.group),
  }));

  app.get('/v1/backends', { schema: { querystring: Type.Object({ group: Type.Optional(GroupName) }) } }, async (request) => ({
    backends: await store.backends(request.query.group),
  }));

  // ── tables and segments ──
  app.put(
    '/v1/tables/:table',
    {
      ...auth,
      schema: {
        params: Type.Object({ table: TableName }),
        body: Type.Object(
          {
            timestampColumn: TimestampColumn,
            columns: Type.Array(Type.Object({ name: Type.String({ minLength: 1, maxLength: 200 }), type: Type.String({ minLength: 1, maxLength: 500 }) }), { minItems: 1, maxItems: 2000 }),
          },
          { additionalProperties: false },
        ),
      },
    },
    async (request) => store.ensureTable({ name: request.params.table, ...request.body }),
  );

  app.get('/v1/tables', async () => ({ tables: await store.listTables() }));

  app.get('/v1/tables/:table', { schema: { params: Type.Object({ table: TableName }) } }, async (request) => {
    const table = await store.getTable(request.params.table);
    if (!table) throw notFound('table_not_found', `table "${request.params.table}" does not exist`);
    return table;
  });

  // What readers check their cached schema and manifest against: one indexed row, no segment list.
  app.get('/v1/tables/:table/version', { ...quiet, schema: { params: Type.Object({ table: TableName }) } }, async (request) => {
    const version = await store.tableVersion(request.params.table);
    if (!version) throw notFound('table_not_found', `table "${request.params.table}" does not exist`);
    return version;
  });

  app.get(
    '/v1/tables/:table/segments',
    { schema: { params: Type.Object({ table: TableName }), querystring: Type.Object({ from: Type.Optional(Type.Integer()), to: Type.Optional(Type.Integer()) }) } },
    async (request) => {
      if (!(await store.getTable(request.params.table))) throw notFound('table_not_found', `table "${request.params.table}" does not exist`);
      return { segments: await store.listSegments(request.params.table, request.query) };
    },
  );

  app.get('/v1/segments/:id', { schema: { params: Type.Object({ id: SegmentId }) } }, async (request) => {
    const segment = await store.getSegment(request.params.id);
    if (!segment) throw notFound('segment_not_found', `segment "${request.params.id}" is not in the manifest`);
    return segment;
  });

  app.post('/v1/segments', { ...auth, schema: { body: SegmentSchema } }, async (request) => store.commitSegment(request.body));

  app.post(
    '/v1/segments/swap',
    {
      ...auth,
      schema: {
        body: Type.Object(
          {
            retire: Type.Array(SegmentId, { minItems: 1, maxItems: 10_000 }),
            add: SegmentSchema,
            // A swap made under a lease: it commits only while the lease still carries this token (409 lease_lost otherwise).
            fence: Type.Optional(Type.Object({ lease: LeaseName, token: Type.Integer({ minimum: 0 }) }, { additionalProperties: false })),
          },
          { additionalProperties: false },
        ),
      },
    },
    async (request) => store.swapSegments(request.body.retire, request.body.add, request.body.fence),
  );

  app.post(
    '/v1/segments/retire',
    { ...auth, schema: { body: Type.Object({ ids: Type.Array(SegmentId, { minItems: 1, maxItems: 10_000 }) }, { additionalProperties: false }) } },
    async (request) => {
      await store.retireSegments(request.body.ids);
      return { ok: true };
    },
  );

  app.get('/v1/segments/retired', { schema: { querystring: Type.Object({ before: Type.Integer() }) } }, async (request) => ({
    segments: await store.listRetired(request.query.before),
  }));

  app.delete('/v1/segments/:id', { ...auth, schema: { params: Type.Object({ id: SegmentId }) } }, async (request) => {
    await store.forgetSegment(request.params.id);
    return { ok: true };
  });

  app.post(
    '/v1/segments/known',
    { schema: { body: Type.Object({ ids: Type.Array(Type.String({ maxLength: 300 }), { maxItems: 10_000 }) }, { additionalProperties: false }) } },
    async (request) => ({ known: await store.knownSegments(request.body.ids) }),
  );

  // ── leases ──
  const Holder = Type.String({ minLength: 1, maxLength: 200 });
  app.post(
    '/v1/leases/:name/acquire',
    { ...auth, schema: { params: Type.Object({ name: LeaseName }), body: Type.Object({ holder: Holder, ttlMs: Type.Integer({ minimum: 1, maximum: 86_400_000 }) }, { additionalProperties: false }) } },
    // Not granted is an answer, not an error: it says who holds the lease and until when.
    async (request) => store.acquireLease(request.params.name, request.body.holder, request.body.ttlMs),
  );

  app.post(
    '/v1/leases/:name/release',
    { ...auth, schema: { params: Type.Object({ name: LeaseName }), body: Type.Object({ holder: Holder }, { additionalProperties: false }) } },
    async (request) => ({ released: await store.releaseLease(request.params.name, request.body.holder) }),
  );

  app.post(
    '/v1/leases/release-holder',
    { ...auth, schema: { body: Type.Object({ holder: Holder }, { additionalProperties: false }) } },
    async (request) => ({ released: await store.releaseLeasesOf(request.body.holder) }),
  );

  app.get('/v1/leases', async () => ({ leases: await store.listLeases() }));

  return app;
}

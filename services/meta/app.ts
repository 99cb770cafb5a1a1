/**
 * The meta service: node registry with heartbeats, members, SHOW BACKENDS, the segment manifest and
 * leases. It keeps no state of its own beyond its store: over PostgreSQL any number of replicas
 * serve the same API.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { requireToken } from '../common/auth.js';
import { DomainError, notFound } from '../common/errors.js';
import { answers, Ok } from '../common/schemas.js';
import { createServiceApp } from '../common/service-app.js';
import {
  BackendList,
  BackendsQuery,
  ColumnsAdded,
  RetentionList,
  TableStats,
  RetentionSetting,
  ColumnTypeChange,
  GroupParams,
  Heartbeat,
  HolderBody,
  KnownList,
  KnownQuery,
  LeaseGrant,
  LeaseList,
  LeaseParams,
  LeaseReleased,
  LeaseRequest,
  LeasesReleased,
  MemberList,
  NodeParams,
  NodeRegistration,
  Purged,
  PurgeRequest,
  Removed,
  RetiredQuery,
  Segment,
  SegmentIds,
  SegmentList,
  SegmentParams,
  SegmentRange,
  SegmentRow,
  SegmentSwap,
  TableDefinition,
  TableInfo,
  TableList,
  TableParams,
  TableVersion,
  DropList,
  DropQuery,
  DropRetired,
  DropRetireRequest,
  ChangesQuery,
  MembersQuery,
  ManifestChanges,
  ManifestPage,
  ManifestQuery,
  MANIFEST_PAGE,
  MAX_MANIFEST_CHANGES,
  RowDelete,
  RowDeleteList,
  RowDeleteParams,
  RowDeleteReport,
  RowDeleteRequest,
  SegmentRowsRemoval,
} from './api.js';
import { MemberWatch } from './member-watch.js';
import { deleteNotFound, tableNotFound, type MetaStore } from './store.js';

export interface MetaAppOptions {
  store: MetaStore;
  /** Bearer token required on every mutating endpoint. */
  token: string;
  /** Most vCPUs a node may declare: a node's weight is its share of the data, so an absurd claim would take it all. @default 1024 */
  maxVcpus?: number;
  /** @default true */
  logger?: boolean;
  /** How stale a member list answered may be: each group's is read at most this often. @default 1000 */
  memberRefreshMs?: number;
}

export function buildMetaApp(options: MetaAppOptions): FastifyInstance {
  // Heartbeats, member polls and health checks arrive every few seconds: log them only when they fail.
  const app = createServiceApp('meta', { bodyLimit: 1 << 20, quietHealth: true, logger: options.logger });
  const { store } = options;
  const auth = { onRequest: requireToken(options.token) };
  const quiet = { logLevel: 'warn' as const };
  const ok = { ok: true as const };

  // Ready while the store answers: a replica that lost its database leaves the load balancer's rotation.
  app.get('/readyz', { ...quiet, schema: { response: answers(Ok) } }, async () => {
    await store.ping();
    return ok;
  });

  // ── nodes ──
  app.post(
    '/v1/nodes',
    { ...auth, schema: { body: NodeRegistration(options.maxVcpus), response: answers(Ok) } },
    async (request) => {
      await store.registerNode(request.body);
      return ok;
    },
  );

  app.post(
    '/v1/nodes/:id/heartbeat',
    { ...auth, ...quiet, schema: { params: NodeParams, body: Heartbeat(options.maxVcpus), response: answers(Ok) } },
    async (request) => {
      if (!(await store.heartbeat(request.params.id, request.body.vcpus))) {
        throw notFound('unknown_node', `node "${request.params.id}" is not registered; register again`);
      }
      return ok;
    },
  );

  app.delete(
    '/v1/nodes/:id',
    { ...auth, schema: { params: NodeParams, response: answers(Removed) } },
    async (request) => ({
      removed: await store.deregisterNode(request.params.id),
    }),
  );

  // By change: the ETag names the list's version; a reader that sends it back (If-None-Match) is
  // answered 304 while it is current, after waiting up to `wait` ms for the next one.
  const watch = new MemberWatch({ members: (group) => store.members(group), refreshMs: options.memberRefreshMs });
  app.get(
    '/v1/groups/:group/members',
    {
      ...quiet,
      schema: {
        params: GroupParams,
        querystring: MembersQuery,
        response: { ...answers(MemberList), 304: Type.Null() },
      },
    },
    async (request, reply) => {
      const since = request.headers['if-none-match'];
      // The response's close: sent, or the reader gone (the request's fires once its body is read).
      const gone = new AbortController();
      reply.raw.once('close', () => gone.abort());
      const list = await watch.next(request.params.group, since, since ? (request.query.wait ?? 0) : 0, gone.signal);
      void reply.header('etag', list.etag);
      if (list.etag === since) return reply.code(304).send(null);
      return { group: request.params.group, members: list.members };
    },
  );

  app.get(
    '/v1/backends',
    { schema: { querystring: BackendsQuery, response: answers(BackendList) } },
    async (request) => ({
      backends: await store.backends(request.query.group),
    }),
  );

  // ── tables and segments ──
  app.put(
    '/v1/tables/:table',
    { ...auth, schema: { params: TableParams, body: TableDefinition, response: answers(TableInfo) } },
    async (request) => store.ensureTable({ name: request.params.table, ...request.body }),
  );

  // Only types change (a repair of what meta says the segments hold): same names, same order.
  app.put(
    '/v1/tables/:table/column-types',
    { ...auth, schema: { params: TableParams, body: ColumnTypeChange, response: answers(TableInfo) } },
    async (request) => store.setColumnTypes(request.params.table, request.body.from, request.body.to),
  );

  // Only appends: a column's name and type, once added, stay.
  app.post(
    '/v1/tables/:table/columns',
    { ...auth, schema: { params: TableParams, body: ColumnsAdded, response: answers(TableInfo) } },
    async (request) => store.addColumns(request.params.table, request.body.columns),
  );

  app.put(
    '/v1/tables/:table/retention',
    { ...auth, schema: { params: TableParams, body: RetentionSetting, response: answers(Ok) } },
    async (request) => {
      await store.setRetention(request.params.table, request.body.retentionMs);
      return { ok: true as const };
    },
  );

  app.delete(
    '/v1/tables/:table/retention',
    { ...auth, schema: { params: TableParams, response: answers(Ok) } },
    async (request) => {
      await store.setRetention(request.params.table, null);
      return { ok: true as const };
    },
  );

  app.delete(
    '/v1/tables/:table',
    { ...auth, schema: { params: TableParams, querystring: DropQuery, response: answers(Ok) } },
    async (request) => {
      await store.dropTable(request.params.table, request.query.incarnation);
      return { ok: true as const };
    },
  );

  app.get('/v1/drops', { schema: { response: answers(DropList) } }, async () => ({ drops: await store.drops() }));

  app.post(
    '/v1/tables/:table/drop/retire',
    { ...auth, schema: { params: TableParams, body: DropRetireRequest, response: answers(DropRetired) } },
    async (request) => store.retireDropped(request.params.table, request.body.incarnation, request.body.limit),
  );

  app.post(
    '/v1/tables/:table/deletes',
    { ...auth, schema: { params: TableParams, body: RowDeleteRequest, response: answers(RowDelete) } },
    async (request) => store.requestDelete(request.params.table, request.body),
  );

  app.get('/v1/deletes', { schema: { response: answers(RowDeleteList) } }, async () => ({
    deletes: await store.pendingDeletes(),
  }));

  app.get(
    '/v1/deletes/:id',
    { schema: { params: RowDeleteParams, response: answers(RowDeleteReport) } },
    async (request) =>
      (await store.deleteReport(request.params.id)) ?? Promise.reject(deleteNotFound(request.params.id)),
  );

  app.post(
    '/v1/deletes/:id/segments',
    { ...auth, schema: { params: RowDeleteParams, body: SegmentRowsRemoval, response: answers(Ok) } },
    async (request) => {
      await store.removeRows(request.params.id, request.body);
      return ok;
    },
  );

  app.post(
    '/v1/deletes/:id/finish',
    { ...auth, schema: { params: RowDeleteParams, response: answers(RowDeleteReport) } },
    async (request) => store.finishDelete(request.params.id),
  );

  app.get(
    '/v1/tables/:table/stats',
    { schema: { params: TableParams, response: answers(TableStats) } },
    async (request) => {
      const stats = await store.tableStats(request.params.table);
      if (!stats) throw tableNotFound(request.params.table);
      return stats;
    },
  );

  app.get('/v1/retentions', { schema: { response: answers(RetentionList) } }, async () => ({
    retentions: await store.retentions(),
  }));

  app.get('/v1/tables', { schema: { response: answers(TableList) } }, async () => ({
    tables: await store.listTables(),
  }));

  app.get('/v1/tables/:table', { schema: { params: TableParams, response: answers(TableInfo) } }, async (request) => {
    const table = await store.getTable(request.params.table);
    if (!table) throw notFound('table_not_found', `table "${request.params.table}" does not exist`);
    return table;
  });

  // What readers check their cached schema and manifest against: one indexed row, no segment list.
  app.get(
    '/v1/tables/:table/version',
    { ...quiet, schema: { params: TableParams, response: answers(TableVersion) } },
    async (request) => {
      const version = await store.tableVersion(request.params.table);
      if (!version) throw notFound('table_not_found', `table "${request.params.table}" does not exist`);
      return version;
    },
  );

  app.get(
    '/v1/tables/:table/segments',
    { schema: { params: TableParams, querystring: SegmentRange, response: answers(SegmentList) } },
    async (request) => {
      if (!(await store.getTable(request.params.table)))
        throw notFound('table_not_found', `table "${request.params.table}" does not exist`);
      return { segments: await store.listSegments(request.params.table, request.query) };
    },
  );

  app.get(
    '/v1/tables/:table/changes',
    { schema: { params: TableParams, querystring: ChangesQuery, response: answers(ManifestChanges) } },
    async (request) => {
      const { table } = request.params;
      const changes = await store.manifestChanges(
        table,
        request.query.since,
        request.query.limit ?? MAX_MANIFEST_CHANGES,
      );
      if (!changes) throw tableNotFound(table);
      if (changes === 'snapshot')
        throw new DomainError(
          'gone',
          'snapshot_needed',
          `the change log of "${table}" no longer reaches back to version ${request.query.since}: read its manifest whole`,
        );
      return changes;
    },
  );

  app.get(
    '/v1/tables/:table/manifest',
    { schema: { params: TableParams, querystring: ManifestQuery, response: answers(ManifestPage) } },
    async (request) => {
      const { version, after, limit } = request.query;
      const page = await store.manifestPage(request.params.table, version, after, limit ?? MANIFEST_PAGE);
      if (!page) throw tableNotFound(request.params.table);
      return page;
    },
  );

  app.get('/v1/segments/:id', { schema: { params: SegmentParams, response: answers(SegmentRow) } }, async (request) => {
    const segment = await store.getSegment(request.params.id);
    if (!segment) throw notFound('segment_not_found', `segment "${request.params.id}" is not in the manifest`);
    return segment;
  });

  app.post('/v1/segments', { ...auth, schema: { body: Segment, response: answers(SegmentRow) } }, async (request) =>
    store.commitSegment(request.body),
  );

  app.post(
    '/v1/segments/swap',
    { ...auth, schema: { body: SegmentSwap, response: answers(SegmentRow) } },
    async (request) => store.swapSegments(request.body.retire, request.body.add, request.body.fence),
  );

  app.post('/v1/segments/retire', { ...auth, schema: { body: SegmentIds, response: answers(Ok) } }, async (request) => {
    await store.retireSegments(request.body.ids);
    return ok;
  });

  app.get(
    '/v1/segments/retired',
    { schema: { querystring: RetiredQuery, response: answers(SegmentList) } },
    async (request) => ({
      segments: await store.listRetired(request.query.before, request.query.limit),
    }),
  );

  app.post('/v1/segments/forget', { ...auth, schema: { body: SegmentIds, response: answers(Ok) } }, async (request) => {
    await store.forgetSegments(request.body.ids);
    return ok;
  });

  // One at a time, as janitors of earlier versions ask.
  app.delete(
    '/v1/segments/:id',
    { ...auth, schema: { params: SegmentParams, response: answers(Ok) } },
    async (request) => {
      await store.forgetSegments([request.params.id]);
      return ok;
    },
  );

  app.post(
    '/v1/segments/purge',
    { ...auth, schema: { body: PurgeRequest, response: answers(Purged) } },
    async (request) => ({ purged: await store.purgeRetired(request.body.limit) }),
  );

  app.post('/v1/segments/known', { schema: { body: KnownQuery, response: answers(KnownList) } }, async (request) => ({
    known: await store.knownSegments(request.body.ids),
  }));

  // ── leases ──
  app.post(
    '/v1/leases/:name/acquire',
    { ...auth, schema: { params: LeaseParams, body: LeaseRequest, response: answers(LeaseGrant) } },
    // Not granted is an answer, not an error: it says who holds the lease and until when.
    async (request) => store.acquireLease(request.params.name, request.body.holder, request.body.ttlMs),
  );

  app.post(
    '/v1/leases/:name/release',
    { ...auth, schema: { params: LeaseParams, body: HolderBody, response: answers(LeaseReleased) } },
    async (request) => ({
      released: await store.releaseLease(request.params.name, request.body.holder),
    }),
  );

  app.post(
    '/v1/leases/release-holder',
    { ...auth, schema: { body: HolderBody, response: answers(LeasesReleased) } },
    async (request) => ({
      released: await store.releaseLeasesOf(request.body.holder),
    }),
  );

  app.get('/v1/leases', { schema: { response: answers(LeaseList) } }, async () => ({
    leases: await store.listLeases(),
  }));

  return app;
}

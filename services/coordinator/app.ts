/** The coordinator's HTTP API: SQL, ingest, members, workload groups, the query log, health and metrics. */
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { concentration } from '../../core/compute-concentration.js';
import { segmentsByDay } from '../../core/segment-days.js';
import { requireToken } from '../common/auth.js';
import { decodedBody } from '../common/body-limit.js';
import type { MemberView } from '../common/member-view.js';
import { badRequest, DomainError, notFound } from '../common/errors.js';
import { passOnRefusal } from '../common/http-client.js';
import { answers, Ok } from '../common/schemas.js';
import { createServiceApp, serveMetrics } from '../common/service-app.js';
import type { MetaClient } from '../meta/client.js';
import { QueryNodeClient } from '../query-node/client.js';
import {
  AttachQuery,
  AttachRequest,
  AttachResult,
  ConcentrationQuery,
  ConcentrationReport,
  CoordinatorReadiness,
  DeleteRequest,
  DeleteRequested,
  IngestParams,
  IngestQuery,
  IngestResult,
  NDJSON_TYPE,
  NodeList,
  QueryRequest,
  QueryResult,
  RecentQueries,
  RetentionSetting,
  SegmentDays,
  TableDetails,
  TableDropped,
  TableList,
  WorkloadGroups,
} from './api.js';
import { exchangeRowsCounter } from '../common/final-stage/metrics.js';
import type { SqlEngine } from './sql-engine.js';
import { ATTACH_PATH, type Attacher } from './ingest/attach.js';
import {
  ALREADY_COMMITTED,
  BATCH_FORMATS,
  batchFormat,
  DEFAULT_MAX_INGEST_BYTES,
  type Ingestor,
} from './ingest/ingest.js';
import { BULK_PATH, DEFAULT_SHIPPER_MAX_BYTES, elasticApi } from './ingest/elastic-api.js';
import { IngestMetrics } from './ingest/ingest-metrics.js';
import { DEFAULT_MAX_DEPTH } from './ingest/ndjson-rows.js';
import { OTLP_PATH, otlpApi } from './ingest/otlp-api.js';
import { QueryLog } from './query-log.js';
import { RecentQueryLog } from './recent-queries.js';
import type { QueryService } from './query-service.js';
import { StreamedAnswer } from './execution/streamed-answer.js';
import { tableDropWorkflowId } from '../../workflows/contracts/table-drop.js';
import { rowDeleteWorkflowId } from '../../workflows/contracts/row-delete.js';
import { checkDeletePredicate } from './planning/delete-predicate.js';
import type { SqlBinder } from './planning/sql-binder.js';

export interface CoordinatorAppOptions {
  queries: QueryService;
  ingestor: Ingestor;
  /** Attaches Parquet objects in a bucket as segments; without it the endpoint is not served. */
  attacher?: Attacher;
  /** The coordinator's final-stage DuckDB: what its exchange holds and has received, for /metrics. */
  finalStages?: Pick<SqlEngine, 'heldRows' | 'rowsReceived'>;
  /** The parser and binder a delete's condition is checked with. */
  binder: SqlBinder;
  meta: MetaClient;
  view: MemberView;
  token: string;
  /** Largest batch one ingest call takes, as sent and as unpacked. @default DEFAULT_MAX_INGEST_BYTES */
  maxIngestBytes?: number;
  /** Largest body a log shipper's request (`_bulk`, OTLP) may have, as sent and decompressed. @default DEFAULT_SHIPPER_MAX_BYTES */
  maxShipperBytes?: number;
  /** Deepest nesting an ingested row may have. @default DEFAULT_MAX_DEPTH */
  maxIngestDepth?: number;
  /** Answered queries the query log keeps (sizes and times only). @default 10000 */
  queryLogSize?: number;
  /**
   * What /readyz checks besides meta, each named in its answer when down: a required one (S3:
   * ingest and cold reads need it) makes the coordinator unready; another (Temporal: heavy
   * queries only) is reported while light queries are still served.
   */
  dependencies?: { name: string; required: boolean; check(): Promise<unknown> }[];
  /** @default true */
  logger?: boolean;
}

export function buildCoordinatorApp(options: CoordinatorAppOptions): FastifyInstance {
  const app = createServiceApp('coordinator', { bodyLimit: 1 << 20, logger: options.logger });
  const { queries, meta, view } = options;
  const registry = new Registry();
  const queryCount = new Counter({
    name: 'berth_queries_total',
    help: 'Queries answered, by route and verdict',
    labelNames: ['route', 'verdict'],
    registers: [registry],
  });
  const resultCount = new Counter({
    name: 'berth_query_results_total',
    help: 'Answers computed, and answers served from the result cache',
    labelNames: ['result'],
    registers: [registry],
  });
  const queryTime = new Histogram({
    name: 'berth_query_seconds',
    help: 'Query latency, by route and verdict',
    labelNames: ['route', 'verdict'],
    registers: [registry],
  });
  new Gauge({
    name: 'berth_workload_queries',
    help: 'Queries running and waiting per workload group (the heavy pool: over every coordinator)',
    labelNames: ['group', 'state'],
    registers: [registry],
    async collect() {
      for (const g of await queries.workload())
        for (const state of ['running', 'waiting'] as const) this.set({ group: g.name, state }, g[state]);
    },
  });
  const { finalStages } = options;
  if (finalStages) {
    const { heldRows } = finalStages;
    new Gauge({
      name: 'berth_exchange_held_bytes',
      help: 'Scan-stage rows held in memory for final stages, and the most that may be (BERTH_EXCHANGE_MEMORY_BYTES)',
      labelNames: ['kind'],
      registers: [registry],
      collect() {
        this.set({ kind: 'held' }, heldRows.usedBytes);
        this.set({ kind: 'budget' }, heldRows.budgetBytes);
      },
    });
    exchangeRowsCounter(registry, () => finalStages.rowsReceived);
  }
  // From the first byte of an ingest batch to its segment committed: when its rows can be queried.
  const ingestToQueryable = new Histogram({
    name: 'berth_ingest_to_queryable_seconds',
    help: 'Time from an ingest batch arriving to its rows being queryable (segment committed)',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  });
  const queryLog = new QueryLog(options.queryLogSize);
  const recent = new RecentQueryLog();

  // Rows, bytes, failures and commit time per way in: files by format, attached objects, shippers.
  const ingestMetrics = new IngestMetrics(registry, [
    ...new Set(Object.values(BATCH_FORMATS)),
    ATTACH_PATH,
    BULK_PATH,
    OTLP_PATH,
  ]);
  // The log shippers' endpoints: Elasticsearch's _bulk and its handshake, and OTLP/HTTP logs.
  const shippers = {
    ingestor: options.ingestor,
    meta,
    token: options.token,
    maxBodyBytes: options.maxShipperBytes ?? DEFAULT_SHIPPER_MAX_BYTES,
    metrics: ingestMetrics,
  };
  void app.register(elasticApi, { ...shippers, maxDepth: options.maxIngestDepth ?? DEFAULT_MAX_DEPTH });
  void app.register(otlpApi, shippers);

  // NDJSON streams to a scratch file instead of being buffered.
  // Batches are streamed to the ingestor as they are, whatever their format.
  app.addContentTypeParser([...Object.keys(BATCH_FORMATS), 'text/tab-separated-values'], (_request, payload, done) =>
    done(null, payload),
  );

  app.get(
    '/readyz',
    { schema: { response: { 200: CoordinatorReadiness, 503: CoordinatorReadiness } } },
    async (_request, reply) => {
      const members = view.members?.length ?? 0;
      const failure = (check: () => Promise<unknown>) =>
        check().then(
          () => undefined,
          (error: Error) => error.message,
        );
      const [metaDown, ...dependencies] = await Promise.all([
        failure(() => meta.ping()),
        ...(options.dependencies ?? []).map(async (d) => ({ ...d, down: await failure(d.check) })),
      ]);
      const down = Object.fromEntries(dependencies.filter((d) => d.down).map((d) => [d.name, d.down!]));
      const ready = members > 0 && !metaDown && !dependencies.some((d) => d.down && d.required);
      return reply.code(ready ? 200 : 503).send({
        ready,
        members,
        ...(metaDown ? { reason: metaDown } : {}),
        ...(Object.keys(down).length > 0 ? { down } : {}),
      });
    },
  );
  serveMetrics(app, registry);

  app.post('/v1/query', { schema: { body: QueryRequest, response: answers(QueryResult) } }, async (request, reply) => {
    // A query stops on every node (and a heavy one leaves the pool's line) when its client goes away.
    const gone = new AbortController();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) gone.abort();
    });
    // Asked for NDJSON: the rows go out as they are made, with no cap on their size (streamed-answer.ts).
    const streamed = request.headers.accept?.includes(NDJSON_TYPE)
      ? new StreamedAnswer(() => {
          reply.hijack();
          return reply.raw;
        })
      : undefined;
    let result: QueryResult;
    try {
      result = await queries.query(request.body.sql, gone.signal, streamed);
    } catch (error) {
      recent.failed(request.body.sql, error as Error);
      if (!streamed?.started) throw error; // nothing sent yet: answered as any error is
      request.log.warn({ err: error }, 'streamed query failed after its first line');
      streamed.fail(error);
      return reply;
    }
    const labels = { route: result.stats.route, verdict: result.stats.verdict.class };
    queryCount.inc(labels);
    resultCount.inc({ result: result.stats.result });
    queryTime.observe(labels, result.stats.elapsedMs / 1000);
    const { stats } = result;
    const computed = stats.result === 'computed'; // a kept answer scanned nothing and ran no final stage
    queryLog.record({
      at: Date.now(),
      scanBytes: computed ? stats.scanBytes : 0,
      computeMs: stats.elapsedMs - (stats.pool?.waitedMs ?? 0),
      heavy: computed && stats.verdict.class === 'heavy',
      group: computed ? stats.group : 'result cache',
      ...(computed && stats.verdict.class === 'heavy' ? { bottleneck: stats.verdict.bottleneck } : {}),
      finalStage: computed ? stats.stages.final : 'result cache',
    });
    recent.answered(request.body.sql, streamed ? undefined : result.rows.length, stats);
    request.log.info({ stats: result.stats }, 'query answered');
    if (!streamed) return result;
    streamed.end(result.stats);
    return reply;
  });

  app.post(
    '/v1/tables/:table/rows',
    {
      onRequest: requireToken(options.token),
      schema: { params: IngestParams, querystring: IngestQuery, response: answers(IngestResult) },
    },
    async (request, reply) => {
      const arrived = performance.now();
      const { timestampColumn, noTimestamp } = request.query;
      if (noTimestamp && timestampColumn !== undefined)
        throw badRequest('timestamp_conflict', 'a batch names a timestampColumn or asks for noTimestamp, not both');
      const format = batchFormat(request.headers['content-type'] ?? '', request.query);
      const path = format.format;
      try {
        const body = decodedBody(request, options.maxIngestBytes ?? DEFAULT_MAX_INGEST_BYTES);
        body.on('data', (chunk: Buffer) => ingestMetrics.received(path, chunk.length));
        const result = await options.ingestor.ingest(
          request.params.table,
          body,
          noTimestamp ? null : timestampColumn,
          format,
        );
        ingestToQueryable.observe((performance.now() - arrived) / 1000);
        // A batch sent again adds no rows.
        ingestMetrics.committed(path, result.push.reason === ALREADY_COMMITTED ? 0 : result.segment.rows, arrived);
        return result;
      } catch (error) {
        ingestMetrics.failed(path, error instanceof DomainError && error.kind === 'invalid' ? 'invalid' : 'retryable');
        // A batch refused mid-stream leaves the rest of its body unread on the connection: close it.
        reply.header('connection', 'close');
        throw error;
      }
    },
  );

  // Compute concentration over the queries this coordinator answered (since `since`, ms since the epoch).
  app.get(
    '/v1/query-log/concentration',
    { schema: { querystring: ConcentrationQuery, response: answers(ConcentrationReport) } },
    async (request) => {
      const entries = queryLog.entries(request.query.since);
      return { capacity: queryLog.capacity, from: entries[0]?.at, ...concentration(entries) };
    },
  );

  // The last queries with their SQL: only with the token, since SQL may name what it looks for.
  app.get(
    '/v1/query-log/recent',
    { onRequest: requireToken(options.token), schema: { response: answers(RecentQueries) } },
    async () => ({ capacity: recent.capacity, queries: recent.list() }),
  );

  // A table's retention period: set (PUT) or removed (DELETE), for a table that exists.
  const byToken = { onRequest: requireToken(options.token) };
  const setRetention = async (table: string, retentionMs: number | null) => {
    const info = await meta.findTable(table);
    if (!info) throw notFound('table_not_found', `table "${table}" does not exist`);
    if (info.timestampColumn === null && retentionMs !== null)
      throw badRequest(
        'no_timestamp',
        `table "${table}" has no timestamp column: its rows have no age to retire them by`,
      );
    await meta.setRetention(table, retentionMs);
    return { ok: true as const };
  };
  app.put(
    '/v1/tables/:table/retention',
    { ...byToken, schema: { params: IngestParams, body: RetentionSetting, response: answers(Ok) } },
    async (request) => setRetention(request.params.table, request.body.retentionMs),
  );
  app.delete(
    '/v1/tables/:table/retention',
    { ...byToken, schema: { params: IngestParams, response: answers(Ok) } },
    async (request) => setRetention(request.params.table, null),
  );

  // Attach: Parquet objects already in a bucket become segments where they lie.
  const { attacher } = options;
  if (attacher)
    app.post(
      '/v1/tables/:table/attach',
      {
        ...byToken,
        schema: {
          params: IngestParams,
          querystring: AttachQuery,
          body: AttachRequest,
          response: answers(AttachResult),
        },
      },
      async (request) => {
        const { timestampColumn, noTimestamp } = request.query;
        if (noTimestamp && timestampColumn !== undefined)
          throw badRequest('timestamp_conflict', 'an attach names a timestampColumn or asks for noTimestamp, not both');
        const named = ['prefix', 'glob', 'keys'].filter((k) => request.body[k as keyof AttachRequest] !== undefined);
        if (named.length !== 1)
          throw badRequest('attach_what', 'an attach names its objects by one of prefix, glob or keys');
        const arrived = performance.now();
        const result = await attacher
          .attach(request.params.table, request.body, noTimestamp ? null : timestampColumn)
          .catch((error: unknown) => {
            ingestMetrics.failed(
              ATTACH_PATH,
              error instanceof DomainError && error.kind === 'invalid' ? 'invalid' : 'retryable',
            );
            throw error;
          });
        ingestMetrics.committed(ATTACH_PATH, result.rows, arrived);
        if (result.refused.length > 0) ingestMetrics.failed(ATTACH_PATH, 'invalid');
        return result;
      },
    );

  // Delete by predicate: checked here, recorded in meta; its workflow, started by `berth delete`
  // or a worker's next sync, rewrites the segments that hold matching rows.
  app.post(
    '/v1/tables/:table/deletes',
    { ...byToken, schema: { params: IngestParams, body: DeleteRequest, response: answers(DeleteRequested) } },
    async (request, reply) => {
      const { table } = request.params;
      const info = await meta.findTable(table);
      if (!info) throw notFound('table_not_found', `table "${table}" does not exist`);
      const checked = await checkDeletePredicate(options.binder, info, request.body.where);
      const recorded = await meta
        .requestDelete(table, { incarnation: info.incarnation, ...checked })
        .catch(passOnRefusal);
      reply.code(202);
      return { ...recorded, where: request.body.where, workflowId: rowDeleteWorkflowId(recorded) };
    },
  );

  // Drop: meta hides the table at once; the drop workflow, started by `berth table drop` or a
  // worker's next sync, retires its segments.
  app.delete(
    '/v1/tables/:table',
    { ...byToken, schema: { params: IngestParams, response: answers(TableDropped) } },
    async (request) => {
      const { table } = request.params;
      const info = await meta.findTable(table);
      if (!info) throw notFound('table_not_found', `table "${table}" does not exist`);
      // A drop that raced this one has answered meta first: its 404 is this one's too.
      const stats = await meta.tableStats(table).catch(passOnRefusal);
      await meta.dropTable(table, info.incarnation).catch(passOnRefusal);
      const drop = { table, incarnation: info.incarnation };
      return { ...stats, ...drop, workflowId: tableDropWorkflowId(drop) };
    },
  );

  app.get('/v1/tables', { schema: { response: answers(TableList) } }, async () => ({
    tables: await meta.listTables(),
  }));

  app.get(
    '/v1/tables/:table',
    { schema: { params: IngestParams, response: answers(TableDetails) } },
    async (request) => {
      const { table } = request.params;
      const info = await meta.findTable(table);
      const version = info && (await meta.tableVersion(table));
      if (!info || !version) throw notFound('table_not_found', `table "${table}" does not exist`);
      const [stats, retentions] = await Promise.all([meta.tableStats(table), meta.retentions()]);
      const retentionMs = retentions.find((r) => r.table === table)?.retentionMs ?? null;
      // A table without a timestamp has no oldest or newest row: its segments span all of time.
      const span = info.timestampColumn === null ? { oldest: null, newest: null } : {};
      return { ...info, ...stats, ...span, schema: version.schema, retentionMs };
    },
  );

  app.get(
    '/v1/tables/:table/days',
    { schema: { params: IngestParams, response: answers(SegmentDays) } },
    async (request) => {
      const { table } = request.params;
      if (!(await meta.findTable(table))) throw notFound('table_not_found', `table "${table}" does not exist`);
      return { days: segmentsByDay(await meta.listSegments(table).catch(passOnRefusal)) };
    },
  );

  app.get('/v1/nodes', { schema: { response: answers(NodeList) } }, async () => {
    const backends = await meta.backends();
    const members = view.members ?? [];
    const totalWeight = members.reduce((sum, m) => sum + m.weight, 0);
    // Each live node's warm-up, as it reports it; a node that does not answer in time shows none.
    const warmth = await Promise.all(
      backends.map((b) => (b.alive ? new QueryNodeClient(b.url).warmth().catch(() => undefined) : undefined)),
    );
    return {
      nodes: backends.map((b, i) => {
        const member = members.find((m) => m.id === b.id);
        return {
          ...b,
          weight: b.cpuCores,
          share: member && totalWeight > 0 ? member.weight / totalWeight : 0,
          ...(warmth[i] ? { warmth: warmth[i] } : {}),
        };
      }),
    };
  });

  app.get('/v1/workload-groups', { schema: { response: answers(WorkloadGroups) } }, async () => ({
    groups: await queries.workload(),
  }));

  return app;
}

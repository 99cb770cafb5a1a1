/** The query node's HTTP API: scans over cached segments, pushes of fresh segments, health and metrics. */
import type { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Registry } from 'prom-client';
import { requireToken } from '../common/auth.js';
import { limitedBody } from '../common/body-limit.js';
import { ARROW_STREAM_TYPE } from '../common/arrow-exchange.js';
import { DomainError, httpAnswerOf } from '../common/errors.js';
import type { MemberView } from '../common/member-view.js';
import { answers } from '../common/schemas.js';
import { createServiceApp, serveMetrics } from '../common/service-app.js';
import {
  CacheList,
  CanaryResult,
  FinalStageAnswerRequest,
  FinalStageInputParams,
  FinalStageOpened,
  FinalStageParams,
  FinalStagePart,
  FinalStagePartParams,
  FinalStageRequest,
  type FinalStageLine,
  NodeInfo,
  NodeReadiness,
  PushParams,
  PushQuery,
  PushResult,
  SCAN_ERROR_TRAILER,
  SCAN_STATS_TRAILER,
  trailerJson,
  ScanRequest,
  WarmQuery,
  WarmResult,
} from './api.js';
import type { SegmentCache } from './segment-cache.js';
import type { SegmentMemory } from './segment-memory.js';
import type { SegmentSchemas } from './segment-schema.js';
import type { Scanner } from '../common/scanner.js';
import { ScanService } from './scan-service.js';
import type { Warmer } from './warmer.js';
import type { FinalStages } from './final-stages.js';
import { exchangeRowsCounter } from '../common/final-stage/metrics.js';

export interface QueryNodeAppOptions {
  nodeId: string;
  group: string;
  token: string;
  cache: SegmentCache;
  /** Owned segments scanned again, held as DuckDB tables: read instead of their files. */
  memory: SegmentMemory;
  /** Refuses a scan of a segment whose columns disagree with its table's. */
  schemas: SegmentSchemas;
  scanner: Scanner;
  view: MemberView;
  warmer: Warmer;
  /** Reads Berth's canary object from storage and scans it (the heavy pool's last readiness layer). */
  canary: () => Promise<CanaryResult>;
  /** True once the node is registered with meta. */
  isRegistered: () => boolean;
  /** Heavy queries' final stages, which coordinators run here; without it the node runs none. */
  finalStages?: FinalStages;
  /** Largest segment a push may carry. @default 4 GiB */
  maxSegmentBytes?: number;
  /** Parallel S3 fetches per scan. @default 8 */
  fetchConcurrency?: number;
  /** @default true */
  logger?: boolean;
}

export function buildQueryNodeApp(options: QueryNodeAppOptions): FastifyInstance {
  const app = createServiceApp('query-node', { bodyLimit: 2 << 20, logger: options.logger });
  const { cache, memory, view, nodeId } = options;
  const auth = { onRequest: requireToken(options.token) };
  const metrics = nodeMetrics(cache, memory, options.warmer);
  const scans = new ScanService({
    nodeId,
    cache,
    memory,
    schemas: options.schemas,
    scanner: options.scanner,
    view,
    fetchConcurrency: options.fetchConcurrency,
    metrics,
  });

  // Pushed segments stream straight to disk, and a final stage's inputs into its DuckDB, unbuffered.
  app.addContentTypeParser('application/octet-stream', (_request, payload, done) => done(null, payload));
  app.addContentTypeParser(ARROW_STREAM_TYPE, (_request, payload, done) => done(null, payload));

  app.get('/readyz', { schema: { response: { 200: NodeReadiness, 503: NodeReadiness } } }, async (_request, reply) => {
    const ready = options.isRegistered() && view.placement !== undefined;
    return reply
      .code(ready ? 200 : 503)
      .send({ ready, registered: options.isRegistered(), members: view.members?.length ?? 0 });
  });
  serveMetrics(app, metrics.registry);

  app.get('/v1/info', { schema: { response: answers(NodeInfo) } }, async () => ({
    id: nodeId,
    group: options.group,
    owner: view.placement !== undefined,
    cache: {
      usedBytes: cache.usedBytes,
      budgetBytes: cache.budgetBytes,
      segments: cache.ids().length,
      ...cache.counters,
    },
    warmth: options.warmer.warmth(),
  }));

  app.get('/v1/cache', { schema: { response: answers(CacheList) } }, async () => ({ segments: cache.ids() }));

  // No response schema: the answer is an Arrow IPC stream written by hand (its stats and errors in trailers).
  // Logged only when it fails: a query makes a scan per owner, and two log lines each were about a
  // twelfth of a node's main thread under load (the stats go to the coordinator, counts to /metrics).
  app.post('/v1/scan', { ...auth, logLevel: 'warn', schema: { body: ScanRequest } }, async (request, reply) => {
    // The coordinator hangs up when its client leaves or its deadline passes: stop DuckDB then.
    const hangUp = new AbortController();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) hangUp.abort(new Error('the coordinator hung up'));
    });
    const scan = await scans.open(request.body, hangUp.signal);
    // The rows stream as DuckDB makes them; how the scan ended comes after them, in trailers.
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, { 'content-type': ARROW_STREAM_TYPE, trailer: `${SCAN_STATS_TRAILER}, ${SCAN_ERROR_TRAILER}` });
    scan.streamTo({
      write: (bytes) => raw.write(bytes),
      onDrain: (listener) => raw.on('drain', listener),
      end: (stats, failed) => {
        const trailers: Record<string, string> = { [SCAN_STATS_TRAILER]: trailerJson(stats) };
        if (failed) trailers[SCAN_ERROR_TRAILER] = trailerJson(failed);
        if (raw.destroyed) return;
        try {
          raw.addTrailers(trailers);
          raw.end();
        } catch (failure) {
          raw.destroy(failure as Error); // the coordinator sees a scan cut off, never a whole one
        }
      },
    });
  });

  app.post(
    '/v1/segments/:id',
    {
      ...auth,
      schema: { params: PushParams, querystring: PushQuery, response: answers(PushResult) },
    },
    async (request) => {
      const owner = view.placement?.owner(request.params.id)?.id;
      if (owner !== nodeId) {
        (request.body as Readable).resume(); // drain: a decline is an answer, not an error
        return {
          accepted: false,
          owner: owner ?? null,
          reason: owner ? `segment is owned by ${owner}` : 'no member list yet',
        };
      }
      const bytes = await cache.put(request.params.id, limitedBody(request, options.maxSegmentBytes ?? 4 * 1024 ** 3));
      return { accepted: true, owner, bytes };
    },
  );

  // One warmer pass now; `segments` caps what it fetches (0: only survey what the node owns).
  app.post(
    '/v1/warm',
    { ...auth, schema: { querystring: WarmQuery, response: answers(WarmResult) } },
    async (request) => ({
      fetched: await options.warmer.runOnce(request.query.segments),
    }),
  );

  if (options.finalStages) {
    const { finalStages } = options;
    serveFinalStages(app, finalStages, auth);
    exchangeRowsCounter(metrics.registry, () => finalStages.rowsReceived);
  }

  app.post('/v1/canary', { ...auth, schema: { response: answers(CanaryResult) } }, async () => {
    try {
      return await options.canary();
    } catch (error) {
      // The point of the canary is to say why a backend cannot serve: say it.
      const e = error as Error;
      throw new DomainError(
        'upstream_failed',
        'canary_failed',
        `the canary read from storage failed: ${e.name}: ${e.message.split('\n')[0]}`,
      );
    }
  });

  return app;
}

/** The routes of the final stages coordinators run here (final-stages.ts). */
function serveFinalStages(
  app: ReturnType<typeof createServiceApp>,
  finalStages: FinalStages,
  auth: { onRequest: ReturnType<typeof requireToken> },
): void {
  app.post(
    '/v1/final-stages',
    { ...auth, schema: { body: FinalStageRequest, response: answers(FinalStageOpened) } },
    async (request) => ({ id: await finalStages.create(request.body.inputs, request.body.ttlMs) }),
  );
  app.post(
    '/v1/final-stages/:id/inputs/:input',
    { ...auth, logLevel: 'warn', schema: { params: FinalStageInputParams, response: answers(FinalStagePart) } },
    async (request) => await finalStages.receive(request.params.id, request.params.input, request.body as Readable),
  );
  app.delete(
    '/v1/final-stages/:id/inputs/:input/parts/:part',
    { ...auth, schema: { params: FinalStagePartParams } },
    async (request, reply) => {
      await finalStages.discard(request.params.id, request.params.input, request.params.part);
      return reply.code(204).send();
    },
  );
  app.delete('/v1/final-stages/:id', { ...auth, schema: { params: FinalStageParams } }, async (request, reply) => {
    await finalStages.close(request.params.id);
    return reply.code(204).send();
  });
  // No response schema: NDJSON written as DuckDB makes the rows (FinalStageLine).
  app.post(
    '/v1/final-stages/:id/answer',
    { ...auth, schema: { params: FinalStageParams, body: FinalStageAnswerRequest } },
    async (request, reply) => {
      const hangUp = new AbortController();
      reply.raw.once('close', () => {
        if (!reply.raw.writableFinished) hangUp.abort(new Error('the coordinator hung up'));
      });
      // Errors before the first row are ordinary answers (a 400 for DuckDB's reason about the SQL).
      const { columns, types, rows, close } = await finalStages.answer(
        request.params.id,
        request.body.sql,
        hangUp.signal,
        request.body.parameters,
      );
      reply.hijack();
      const raw = reply.raw;
      // Waits for the coordinator to take a line it could not take at once; nothing once it hung up.
      const line = (value: FinalStageLine) =>
        raw.destroyed || raw.write(`${JSON.stringify(value)}\n`)
          ? undefined
          : new Promise<void>((resolve) => {
              const done = () => {
                raw.off('drain', done);
                raw.off('close', done);
                resolve();
              };
              raw.on('drain', done);
              raw.on('close', done);
            });
      raw.writeHead(200, { 'content-type': 'application/x-ndjson' });
      try {
        await line({ columns, types });
        for await (const batch of rows) {
          if (raw.destroyed) break;
          await line({ rows: batch });
        }
        await line({ end: true });
      } catch (error) {
        const answer = httpAnswerOf(error);
        if (!answer) request.log.error({ err: error }, 'a final stage failed');
        await line({
          error: answer?.code ?? 'internal',
          status: answer?.status ?? 500,
          message: answer?.message ?? 'the final stage failed; see the backend log',
        });
      } finally {
        close();
        raw.end();
      }
    },
  );
}

function nodeMetrics(
  cache: SegmentCache,
  memory: SegmentMemory,
  warmer: Warmer,
): { registry: Registry; scans: Counter<'outcome'>; segmentReads: Counter<'role' | 'cache'> } {
  const registry = new Registry();
  const counter = (name: string, help: string, read: () => number) => {
    let reported = 0;
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        const now = read();
        this.inc(now - reported);
        reported = now;
      },
    });
  };
  counter('berth_cache_hits_total', 'Segment reads served from the local cache', () => cache.counters.hits);
  counter('berth_cache_misses_total', 'Segment reads that had to fetch from S3', () => cache.counters.misses);
  counter('berth_s3_gets_total', 'GET requests sent to S3', () => cache.counters.s3Gets);
  counter('berth_s3_bytes_total', 'Bytes read from S3', () => cache.counters.bytesFromS3);
  const segmentReads = new Counter({
    name: 'berth_segment_reads_total',
    help: 'Segments scanned: role="owner" for segments this node owns, "fallback" for segments read through while their owner is down, "broadcast" for a broadcast join\'s small tables read whole; cache hit or miss',
    labelNames: ['role', 'cache'] as const,
    registers: [registry],
  });
  new Gauge({
    name: 'berth_cache_bytes',
    help: 'Bytes held in the segment cache',
    registers: [registry],
    collect() {
      this.set(cache.usedBytes);
    },
  });
  new Gauge({
    name: 'berth_segment_memory_bytes',
    help: 'The memory tier: bytes of segments held as DuckDB tables (kind="held"), and its budget (kind="budget")',
    labelNames: ['kind'] as const,
    registers: [registry],
    collect() {
      this.set({ kind: 'held' }, memory.usedBytes);
      this.set({ kind: 'budget' }, memory.budgetBytes);
    },
  });
  counter('berth_segment_memory_loads_total', 'Segments loaded into the memory tier', () => memory.counters.loads);
  counter(
    'berth_segment_memory_evictions_total',
    'Segments evicted from the memory tier',
    () => memory.counters.evictions,
  );
  // Warm-up, as of the warmer's last pass: of everything the node owns, and of the share that moved to it.
  const warm = (name: string, help: string, read: (w: ReturnType<Warmer['warmth']>) => number | undefined) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        const value = read(warmer.warmth());
        if (value !== undefined) this.set(value);
      },
    });
  warm('berth_owned_bytes', 'Bytes of the segments this node owns', (w) => w.owned?.bytes);
  warm(
    'berth_owned_warm_bytes',
    'Bytes of the segments this node owns that its cache holds',
    (w) => w.owned?.warmBytes,
  );
  warm('berth_owned_warm_fraction', 'Share of the bytes this node owns that its cache holds', (w) => w.owned?.fraction);
  warm('berth_moved_bytes', 'Bytes that moved to this node at the last membership change', (w) => w.moved?.bytes);
  warm(
    'berth_moved_warm_fraction',
    'Share of the bytes that moved to this node that its cache holds (warm-up progress)',
    (w) => w.moved?.fraction,
  );
  const scans = new Counter({
    name: 'berth_scans_total',
    help: 'Scans run, by outcome',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  return { registry, scans, segmentReads };
}

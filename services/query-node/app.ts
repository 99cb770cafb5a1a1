/** The query node's HTTP API: scans over cached segments, pushes of fresh segments, health and metrics. */
import type { Readable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import pLimit from 'p-limit';
import { Counter, Gauge, Registry } from 'prom-client';
import { requireToken } from '../common/auth.js';
import { limitedBody } from '../common/body-limit.js';
import { ARROW_STREAM_TYPE, arrowStream } from '../common/arrow-exchange.js';
import { ResultCutShort } from '../common/duckdb.js';
import { DomainError, httpAnswerOf, installErrorHandler, resultTooLarge } from '../common/errors.js';
import { loggerOptions } from '../common/logger.js';
import type { MemberView } from '../common/member-view.js';
import { answers, Ok } from '../common/schemas.js';
import {
  CacheList,
  CanaryResult,
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
  type ScanFailure,
  type ScanStats,
} from './api.js';
import type { HeldSegment, SegmentCache } from './segment-cache.js';
import type { HeldTable, SegmentMemory } from './segment-memory.js';
import type { OpenScan, Scanner, TableFiles } from '../common/scanner.js';
import type { Warmer } from './warmer.js';

export interface QueryNodeAppOptions {
  nodeId: string;
  group: string;
  token: string;
  cache: SegmentCache;
  /** Owned segments scanned again, held as DuckDB tables: read instead of their files. */
  memory: SegmentMemory;
  scanner: Scanner;
  view: MemberView;
  warmer: Warmer;
  /** Reads Berth's canary object from storage and scans it (the heavy pool's last readiness layer). */
  canary: () => Promise<CanaryResult>;
  /** True once the node is registered with meta. */
  isRegistered: () => boolean;
  /** Largest segment a push may carry. @default 4 GiB */
  maxSegmentBytes?: number;
  /** Parallel S3 fetches per scan. @default 8 */
  fetchConcurrency?: number;
  /** @default true */
  logger?: boolean;
}

export function buildQueryNodeApp(options: QueryNodeAppOptions): FastifyInstance {
  const app = Fastify({
    logger: options.logger === false ? false : loggerOptions('query-node'),
    bodyLimit: 2 << 20,
  }).withTypeProvider<TypeBoxTypeProvider>();
  installErrorHandler(app);
  const { cache, memory, scanner, view, nodeId } = options;
  const auth = { onRequest: requireToken(options.token) };
  const metrics = nodeMetrics(cache, memory, options.warmer);
  const scans = new Counter({
    name: 'berth_scans_total',
    help: 'Scans run, by outcome',
    labelNames: ['outcome'],
    registers: [metrics.registry],
  });

  // Pushed segments stream straight to disk instead of being buffered.
  app.addContentTypeParser('application/octet-stream', (_request, payload, done) => done(null, payload));

  app.get('/healthz', { schema: { response: answers(Ok) } }, async () => ({ ok: true as const }));
  app.get('/readyz', { schema: { response: { 200: NodeReadiness, 503: NodeReadiness } } }, async (_request, reply) => {
    const ready = options.isRegistered() && view.placement !== undefined;
    return reply
      .code(ready ? 200 : 503)
      .send({ ready, registered: options.isRegistered(), members: view.members?.length ?? 0 });
  });
  app.get('/metrics', async (_request, reply) =>
    reply.type(metrics.registry.contentType).send(await metrics.registry.metrics()),
  );

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
    const started = performance.now();
    // The coordinator hangs up when its client leaves or its deadline passes: stop DuckDB then.
    const hangUp = new AbortController();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) hangUp.abort(new Error('the coordinator hung up'));
    });
    const limit = pLimit(options.fetchConcurrency ?? 8);
    const held: HeldSegment[] = [];
    const heldTables: HeldTable[] = [];
    /** Disk segments offered to the memory tier: each is let go when its load settles. */
    const offered = new Map<HeldSegment, Promise<void>>();
    /** Lets go of what the scan holds once `reading` (a second run for DuckDB's reason) is done. */
    const release = (reading?: Promise<unknown>) => {
      const segments = held.splice(0);
      const tables = heldTables.splice(0);
      void Promise.allSettled([reading]).then(() => {
        for (const table of tables) table.release();
        for (const segment of segments) void (offered.get(segment) ?? Promise.resolve()).then(() => segment.release());
      });
    };
    let scan: OpenScan;
    let tables: TableFiles[];
    // Cache affinity: a read of a segment this node owns, or one that fell to it (its owner is down).
    const placement = view.placement;
    try {
      // A segment in the memory tier is read from its table; the others from their files.
      const acquired = await settleAll(
        request.body.tables.map(async (table) => ({
          table,
          segments: await settleAll(
            table.segments.map((id) =>
              limit(async () => {
                // Only an owner keeps what it reads: a standby's read (its owner is down) passes through.
                const owned = placement?.owner(id)?.id === nodeId;
                const inMemory = memory.hold(id);
                if (inMemory) {
                  heldTables.push(inMemory);
                  metrics.segmentReads.inc({ role: owned ? 'owner' : 'fallback', cache: 'hit' });
                  return { id, owned, inMemory };
                }
                const segment = await cache.acquire(table.name, id, { partial: true, keep: owned });
                held.push(segment);
                metrics.segmentReads.inc({ role: owned ? 'owner' : 'fallback', cache: segment.hit ? 'hit' : 'miss' });
                return { id, owned, segment };
              }),
            ),
          ),
        })),
      );
      tables = acquired.map(({ table, segments }) => ({
        name: table.name,
        schema: table.schema,
        columns: table.columns,
        files: segments.flatMap(({ segment }) => (segment ? [segment.path] : [])),
        inMemory: segments.flatMap(({ inMemory }) => (inMemory ? [inMemory.sql] : [])),
      }));
      // A segment that was not cached came as its footer: fetch the columns the query reads, and no others.
      if (held.some((s) => !s.complete)) {
        const columns = await scanner.columnsRead(request.body.sql, tables).catch(() => undefined); // cannot tell: fetch everything
        await settleAll(held.map((segment) => limit(() => segment.ensure(columns))));
      }
      // An owned segment whole on disk goes to the memory tier on its second scan.
      for (const { segments } of acquired)
        for (const { id, owned, segment } of segments)
          if (segment && owned && segment.kept && segment.complete)
            offered.set(segment, memory.offer(id, segment.path));
      scan = await scanner.open(request.body.sql, tables, hangUp.signal);
    } catch (error) {
      release();
      scans.inc({ outcome: 'failed' });
      throw error;
    }
    // The rows stream as DuckDB makes them; how the scan ended comes after them, in trailers.
    const stats: ScanStats = {
      node: nodeId,
      segments: held.length + heldTables.length,
      hits: held.filter((s) => s.hit).length + heldTables.length,
      misses: held.filter((s) => !s.hit).length,
      s3Gets: held.filter((s) => s.bytesFetched > 0).length,
      bytesFromS3: held.reduce((sum, s) => sum + s.bytesFetched, 0),
      readThrough: held.filter((s) => !s.kept).length,
      rows: 0,
      bytes: 0,
      ms: 0,
    };
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, { 'content-type': ARROW_STREAM_TYPE, trailer: `${SCAN_STATS_TRAILER}, ${SCAN_ERROR_TRAILER}` });
    const maxBytes = request.body.maxResultBytes ?? Infinity;
    const body = arrowStream(scan.result, (rows) => (stats.rows += rows));
    let finished = false;
    /** A second run for DuckDB's reason (below): the segments stay held until it ends. */
    let reasoning: Promise<unknown> | undefined;
    const finish = (error?: unknown) => {
      if (finished) return;
      finished = true;
      body.destroy();
      scan.close(error === undefined);
      release(reasoning);
      stats.ms = Math.round(performance.now() - started);
      const trailers: Record<string, string> = { [SCAN_STATS_TRAILER]: trailerJson(stats) };
      if (error !== undefined) trailers[SCAN_ERROR_TRAILER] = trailerJson(scanError(scanner.explain(error, tables)));
      scans.inc({ outcome: error === undefined ? 'answered' : 'failed' });
      if (raw.destroyed) return;
      try {
        raw.addTrailers(trailers);
        raw.end();
      } catch (failure) {
        raw.destroy(failure as Error); // the coordinator sees a scan cut off, never a whole one
      }
    };
    // Written by hand rather than piped, so that a chunk past the cap is never written after the end.
    body.on('data', (bytes: Buffer) => {
      stats.bytes += bytes.length;
      if (stats.bytes > maxBytes) return finish(resultTooLarge(maxBytes));
      if (!raw.write(bytes)) body.pause();
    });
    raw.on('drain', () => body.resume());
    body.once('end', () => finish());
    body.once('error', (error) => {
      if (!(error instanceof ResultCutShort) || finished || hangUp.signal.aborted) return finish(error);
      // DuckDB does not say why it cut a streamed result short: run the scan again, its rows discarded, for the reason.
      reasoning = scanner.reason(request.body.sql, tables, hangUp.signal);
      reasoning.then(
        (reason) => finish(reason ?? error),
        () => finish(error),
      );
    });
    hangUp.signal.addEventListener('abort', () => finish(hangUp.signal.reason), { once: true });
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

function nodeMetrics(
  cache: SegmentCache,
  memory: SegmentMemory,
  warmer: Warmer,
): { registry: Registry; segmentReads: Counter<'role' | 'cache'> } {
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
    help: 'Segments scanned: role="owner" for segments this node owns, "fallback" for segments read through while their owner is down; cache hit or miss',
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
  return { registry, segmentReads };
}

/**
 * Promise.all that waits for every promise to settle before it rejects: a scan that fails on one
 * segment releases its pins only once no acquire of another is still in flight, or those would
 * be pinned for good.
 */
async function settleAll<T>(promises: Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((s) => s.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}

/** What the trailer says about a scan cut short: the status the coordinator answers with, and why. */
function scanError(error: unknown): ScanFailure {
  const answer = httpAnswerOf(error);
  if (answer) return { status: answer.status, error: answer.code, message: answer.message };
  return {
    status: 500,
    error: 'scan_failed',
    message: error instanceof Error ? error.message.split('\n')[0]! : String(error),
  };
}

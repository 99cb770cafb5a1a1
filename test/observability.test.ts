/**
 * Observability of the durable path. One heavy query on a parked pool is one trace: the
 * coordinator's request, its update-with-start to the pool workflow, the workflow's handling of it
 * and its activities, the canary each new backend answers, and the scans the coordinator then runs
 * on the pool. Coordinator, worker and the pool's backends run in this process, so every span lands
 * in one in-memory exporter. Log lines carry the trace they were written in. And every metric the
 * Grafana dashboard in deploy/ charts is one that the services and a worker process really export.
 */
import { spans, traceSpans } from './helpers/in-memory-tracing.js'; // first: tracing must start before fastify loads
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import { SpanKind, trace } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { Client } from '@temporalio/client';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LocalPlatform } from '../activities/platform/local-platform.js';
import { freePort } from '../cli/embedded/free-port.js';
import { buildControllerApp } from '../services/controller/app.js';
import { launchPool } from '../workflows/pool-client.js';
import { loggerOptions } from '../services/common/logger.js';
import { spanExportersFromEnv, TelemetryConfigError } from '../services/common/telemetry.js';
import { startQueryNode } from '../services/query-node/node.js';
import { poolWorkflowId, type PoolConfig } from '../workflows/contracts/heavy-pool.js';
import { spawnWorkerProcess, startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import { FAST, startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';

const HEAVY_SQL = 'SELECT service, median(latency_ms) AS p50 FROM events GROUP BY service ORDER BY service';

const serverSpan = (list: ReadableSpan[], route: string) =>
  list.find((s) => s.kind === SpanKind.SERVER && s.attributes['http.route'] === route);

describe('one trace across the durable path', () => {
  let cluster: TestCluster;
  let worker: RunningWorker;
  let platform: LocalPlatform;
  let client: Client;
  const taskQueue = `tracing-${randomUUID()}`;
  const group = `traced-${randomUUID().slice(0, 8)}`;
  const pool: PoolConfig = { group, increment: 1, maxReplicas: 1, idleTimeoutMs: 120_000, readinessConfirmMs: 100 };
  const backendUrls: string[] = [];

  beforeAll(async () => {
    cluster = await startCluster({
      vcpus: [2],
      // Every query whose final stage runs its own SQL (a median) is heavy here.
      coordinator: {
        heavyPool: { temporalAddress: inject('temporalAddress'), taskQueue, config: pool, admissionPollMs: 100 },
        verdictThresholds: { scanBytes: 1e12, memoryBytes: 1 },
      },
    });
    await cluster.ingestEvents('events', 2, 300);
    // The pool's backends are query nodes in this process, so that their spans land here too.
    platform = new LocalPlatform({
      startBackend: async (g, i) => {
        const node = await startQueryNode({
          cacheDir: path.join(cluster.dir, `${g}-${i}`),
          group: g,
          metaUrl: cluster.metaUrl,
          token: TOKEN,
          s3: cluster.s3,
          bucket: cluster.bucket,
          vcpus: 2,
          threads: 1,
          logger: false,
          ...FAST,
        });
        backendUrls.push(node.url);
        let stopped!: () => void;
        const exited = new Promise<void>((resolve) => (stopped = resolve));
        return { exited, stop: async () => (await node.close(), stopped()) };
      },
    });
    client = await temporalClient();
    worker = await startWorker(cluster, taskQueue, { heavyPool: { platform } });
  });
  afterAll(async () => {
    await client?.workflow
      .getHandle(poolWorkflowId(group))
      .terminate('test over')
      .catch(() => {});
    await worker?.stop();
    await platform?.close();
    await client?.connection.close();
    await cluster?.close();
  });

  it(
    'follows a heavy query that launches the pool from the coordinator through the workflow and its activities to the query nodes',
    { timeout: 180_000 },
    async () => {
      spans.reset();
      const { status, body } = await cluster.query(HEAVY_SQL);
      expect(status).toBe(200);
      expect(body.stats.group).toBe(group);

      const query = serverSpan(spans.getFinishedSpans(), '/v1/query');
      expect(query, 'the coordinator traced the query').toBeDefined();
      expect(query!.name).toBe('POST /v1/query');
      const traceId = query!.spanContext().traceId;
      const byId = (list: ReadableSpan[]) => new Map(list.map((s) => [s.spanContext().spanId, s]));
      // The workflow's spans leave the sandbox through the worker's sink, after their workflow task.
      await expect
        .poll(() => traceSpans(traceId).some((s) => s.name === 'StartActivity:canaryScan'), { timeout: 30_000 })
        .toBe(true);
      const inTrace = traceSpans(traceId);
      const ids = byId(inTrace);
      const names = inTrace.map((s) => s.name);
      const parentOf = (s: ReadableSpan) => (s.parentSpanId ? ids.get(s.parentSpanId) : undefined);
      const ancestors = (s: ReadableSpan): string[] => {
        const chain: string[] = [];
        for (let p = parentOf(s); p; p = parentOf(p)) chain.push(p.name);
        return chain;
      };

      // Coordinator → Temporal: the report that started the pool's workflow carried the query's trace …
      const updateWithStart = inTrace.find((s) => s.name === 'UpdateWithStartWorkflow:reportDemand');
      expect(updateWithStart, `spans of the trace: ${names.join(', ')}`).toBeDefined();
      expect(ancestors(updateWithStart!)).toContain('POST /v1/query');
      // … into the workflow, which handled it in the same trace …
      const handled = inTrace.find((s) => s.name === 'HandleUpdate:reportDemand');
      expect(handled, 'the workflow handled the report in the query’s trace').toBeDefined();
      expect(parentOf(handled!)?.name).toBe('UpdateWithStartWorkflow:reportDemand');
      // … and launched the pool: its activities, scheduled by the workflow and run by the worker, …
      for (const step of ['setReplicas', 'observePool', 'canaryScan'])
        expect(names, step).toContain(`StartActivity:${step}`);
      const canaryRun = inTrace.find((s) => s.name === 'RunActivity:canaryScan');
      expect(parentOf(canaryRun!)?.name).toBe('StartActivity:canaryScan');
      // … reached the new backend: its POST /v1/canary continued the activity's trace (traceparent on fetch).
      const canary = serverSpan(inTrace, '/v1/canary');
      expect(canary, 'the backend traced its canary').toBeDefined();
      expect(canary!.name).toBe('POST /v1/canary');
      expect(ancestors(canary!)).toEqual(
        expect.arrayContaining(['RunActivity:canaryScan', 'StartActivity:canaryScan']),
      );
      expect(backendUrls.map((u) => new URL(u).port)).toContain(String(canary!.attributes['net.host.port']));

      // Then the coordinator ran the query on the pool's proven backend: that scan is in the trace too.
      const scan = serverSpan(inTrace, '/v1/scan');
      expect(scan, 'the pool backend traced its scan').toBeDefined();
      expect(backendUrls.map((u) => new URL(u).port)).toContain(String(scan!.attributes['net.host.port']));
      expect(ancestors(scan!)).toContain('POST /v1/query');
    },
  );

  it(
    'exports every metric the Grafana dashboard charts, with the labels it groups by: coordinator, query nodes, controller, worker',
    { timeout: 120_000 },
    async () => {
      const scraped = new Map<string, Set<string>>(); // metric → label names seen
      const scrape = (text: string) => {
        for (const line of text.split('\n')) {
          const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? [-+\d.eEInfa]+$/.exec(line);
          if (!match) continue;
          const labels = scraped.get(match[1]!) ?? new Set<string>();
          for (const [, name] of (match[2] ?? '').matchAll(/(\w+)="/g)) labels.add(name!);
          scraped.set(match[1]!, labels);
        }
        return text;
      };
      const get = async (url: string) => scrape(await (await fetch(url)).text());

      // The coordinator and the pool's backend after the heavy query above; a serving node.
      const coordinator = await get(`${cluster.coordinator.url}/metrics`);
      expect(coordinator).toMatch(/^berth_queries_total\{route="rows",verdict="heavy"\} 1$/m);
      // The exchange's memory: its budget, and nothing held once the queries are answered.
      expect(coordinator).toMatch(/^berth_exchange_held_bytes\{kind="budget"\} 67108864$/m);
      expect(coordinator).toMatch(/^berth_exchange_held_bytes\{kind="held"\} 0$/m);
      await get(`${cluster.nodes[0]!.url}/metrics`);
      expect(await get(`${backendUrls[0]}/metrics`)).toMatch(/^berth_cache_misses_total [1-9]/m);
      // The controller reads the pool's status at each scrape: the pool the query launched is ready.
      const controller = buildControllerApp({ client, pools: [pool], token: TOKEN, logger: false });
      try {
        const pools = scrape((await controller.inject({ method: 'GET', url: '/metrics' })).body);
        expect(pools).toContain(`berth_pool_phase{group="${group}",phase="ready"} 1`);
        expect(pools).toContain(`berth_pool_phase{group="${group}",phase="parked"} 0`);
        expect(pools).toContain(`berth_pool_backends_ready{group="${group}"} 1`);
        expect(pools).toContain(`berth_pool_up{group="${group}"} 1`);
      } finally {
        await controller.close();
      }
      // A worker process serves the Temporal SDK's metrics; one launch gives it workflow and activity tasks.
      const metricsPort = await freePort();
      const metricsQueue = `metrics-${randomUUID()}`;
      const metricsGroup = `metered-${randomUUID().slice(0, 8)}`;
      const process = spawnWorkerProcess(cluster, metricsQueue, {
        BERTH_WORKER_METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
        BERTH_HEAVY_GROUP: metricsGroup,
        BERTH_HEAVY_BOOT_DELAY_MS: '600000',
      });
      try {
        const workerMetrics = async () =>
          (await fetch(`http://127.0.0.1:${metricsPort}/metrics`).catch(() => undefined))?.text() ?? '';
        await expect.poll(workerMetrics, { timeout: 60_000 }).toContain('temporal_num_pollers{'); // polling: its search attributes are registered
        await launchPool(
          { client, config: { group: metricsGroup, increment: 1, maxReplicas: 1 }, taskQueue: metricsQueue },
          1,
        );
        await expect
          .poll(workerMetrics, { timeout: 30_000 })
          .toContain('temporal_activity_execution_latency_bucket{activity_type="setReplicas"');
        scrape(await workerMetrics());
      } finally {
        await client.workflow
          .getHandle(poolWorkflowId(metricsGroup))
          .terminate('test over')
          .catch(() => {});
        process.child.kill('SIGKILL');
        await process.exited;
      }

      const dashboard = JSON.parse(
        await readFile(new URL('../deploy/grafana/berth.json', import.meta.url), 'utf8'),
      ) as { panels: { title: string; targets?: { expr: string }[] }[] };
      const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
      expect(exprs.length).toBeGreaterThan(15);
      for (const { panel, expr } of exprs) {
        const metrics = [...expr.matchAll(/\b((?:berth|temporal)_\w+)/g)].map((m) => m[1]!);
        expect(metrics.length, panel).toBeGreaterThan(0);
        for (const metric of metrics) expect([...scraped.keys()], `${panel}: ${metric}`).toContain(metric);
        // `instance` is Prometheus's own label (which target was scraped).
        const groupedBy = [...expr.matchAll(/by \(([^)]*)\)/g)]
          .flatMap((m) => m[1]!.split(',').map((l) => l.trim()))
          .filter((l) => l !== 'instance');
        for (const label of groupedBy)
          expect(
            metrics.some((m) => scraped.get(m)!.has(label)),
            `${panel}: label ${label}`,
          ).toBe(true);
      }
    },
  );

  it('writes the trace id of the request on every line a service logs while serving it', async () => {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write: (chunk: Buffer, _encoding, done) => (
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>),
        done()
      ),
    });
    const app = Fastify({ logger: { ...loggerOptions('traced-app'), stream } });
    app.post('/v1/echo', async (request) => {
      request.log.info('handling it');
      return { ok: true };
    });
    try {
      const url = await app.listen({ host: '127.0.0.1', port: 0 });
      // A caller in a trace of its own: its fetch carries the trace to the app (traceparent).
      const { traceId, status } = await trace.getTracer('test').startActiveSpan('caller', async (span) => {
        const response = await fetch(`${url}/v1/echo`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ any: 'body' }),
        });
        span.end();
        return { traceId: span.spanContext().traceId, status: response.status };
      });
      expect(status).toBe(200);
      const requestLines = lines.filter((l) => l.reqId !== undefined);
      expect(requestLines.map((l) => l.msg)).toEqual(['incoming request', 'handling it', 'request completed']);
      for (const line of requestLines) expect(line.trace_id).toBe(traceId);
      // Outside any request there is no trace to name.
      expect(lines.find((l) => String(l.msg).startsWith('Server listening'))?.trace_id).toBeUndefined();
    } finally {
      await app.close();
    }
  });
});

describe('the exporter configuration', () => {
  it('is off unless OTEL_TRACES_EXPORTER names an exporter, and says what it does not ship', () => {
    expect(spanExportersFromEnv({})).toEqual([]);
    expect(spanExportersFromEnv({ OTEL_TRACES_EXPORTER: 'none' })).toEqual([]);
    expect(spanExportersFromEnv({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_SDK_DISABLED: 'true' })).toEqual([]);
    const [otlp] = spanExportersFromEnv({
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
    });
    expect(otlp?.constructor.name).toBe('OTLPTraceExporter');
    expect(
      spanExportersFromEnv({ OTEL_TRACES_EXPORTER: 'console, otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }),
    ).toHaveLength(2);
    expect(() => spanExportersFromEnv({ OTEL_TRACES_EXPORTER: 'zipkin' })).toThrow(TelemetryConfigError);
    expect(() =>
      spanExportersFromEnv({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'carrier-pigeon' }),
    ).toThrow(/carrier-pigeon.*http\/protobuf, grpc or http\/json/);
  });
});

/**
 * Observability of the durable path. One heavy query on a parked pool is one trace: the
 * coordinator's request, its update-with-start to the pool workflow, the workflow's handling of it
 * and its activities, the canary each new backend answers, and the scans the coordinator then runs
 * on the pool. Coordinator, worker and the pool's backends run in this process, so every span lands
 * in one in-memory exporter. Log lines carry the trace they were written in.
 */
import { spans, traceSpans } from './helpers/in-memory-tracing.js'; // first: tracing must start before fastify loads
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { Writable } from 'node:stream';
import { SpanKind, trace } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { Client } from '@temporalio/client';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LocalPlatform } from '../activities/platform/local-platform.js';
import { loggerOptions } from '../services/common/logger.js';
import { spanExportersFromEnv, TelemetryConfigError } from '../services/common/telemetry.js';
import { startQueryNode } from '../services/query-node/node.js';
import { poolWorkflowId, type PoolConfig } from '../workflows/api.js';
import { startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import { FAST, startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';

const HEAVY_SQL = 'SELECT service, count(DISTINCT user_id) AS users FROM events GROUP BY service ORDER BY service';

const serverSpan = (list: ReadableSpan[], route: string) => list.find((s) => s.kind === SpanKind.SERVER && s.attributes['http.route'] === route);

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
      // Every gathered shape is heavy here.
      coordinator: { heavyPool: { temporalAddress: inject('temporalAddress'), taskQueue, config: pool, admissionPollMs: 100 }, verdictThresholds: { scanBytes: 1e12, memoryBytes: 1 } },
    });
    await cluster.ingestEvents('events', 2, 300);
    // The pool's backends are query nodes in this process, so that their spans land here too.
    platform = new LocalPlatform({
      startBackend: async (g, i) => {
        const node = await startQueryNode({ cacheDir: path.join(cluster.dir, `${g}-${i}`), group: g, metaUrl: cluster.metaUrl, token: TOKEN, s3: cluster.s3, bucket: cluster.bucket, vcpus: 2, threads: 1, logger: false, ...FAST });
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
    await client?.workflow.getHandle(poolWorkflowId(group)).terminate('test over').catch(() => {});
    await worker?.stop();
    await platform?.close();
    await client?.connection.close();
    await cluster?.close();
  });

  it('follows a heavy query that launches the pool from the coordinator through the workflow and its activities to the query nodes', { timeout: 180_000 }, async () => {
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
    await expect.poll(() => traceSpans(traceId).some((s) => s.name === 'StartActivity:canaryScan'), { timeout: 30_000 }).toBe(true);
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
    for (const step of ['setReplicas', 'observePool', 'canaryScan']) expect(names, step).toContain(`StartActivity:${step}`);
    const canaryRun = inTrace.find((s) => s.name === 'RunActivity:canaryScan');
    expect(parentOf(canaryRun!)?.name).toBe('StartActivity:canaryScan');
    // … reached the new backend: its POST /v1/canary continued the activity's trace (traceparent on fetch).
    const canary = serverSpan(inTrace, '/v1/canary');
    expect(canary, 'the backend traced its canary').toBeDefined();
    expect(canary!.name).toBe('POST /v1/canary');
    expect(ancestors(canary!)).toEqual(expect.arrayContaining(['RunActivity:canaryScan', 'StartActivity:canaryScan']));
    expect(backendUrls.map((u) => new URL(u).port)).toContain(String(canary!.attributes['net.host.port']));

    // Then the coordinator ran the query on the pool's proven backend: that scan is in the trace too.
    const scan = serverSpan(inTrace, '/v1/scan');
    expect(scan, 'the pool backend traced its scan').toBeDefined();
    expect(backendUrls.map((u) => new URL(u).port)).toContain(String(scan!.attributes['net.host.port']));
    expect(ancestors(scan!)).toContain('POST /v1/query');
  });

  it('writes the trace id of the request on every line a service logs while serving it', async () => {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({ write: (chunk: Buffer, _encoding, done) => (lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>), done()) });
    const app = Fastify({ logger: { ...loggerOptions('traced-app'), stream } });
    app.post('/v1/echo', async (request) => {
      request.log.info('handling it');
      return { ok: true };
    });
    try {
      const url = await app.listen({ host: '127.0.0.1', port: 0 });
      // A caller in a trace of its own: its fetch carries the trace to the app (traceparent).
      const { traceId, status } = await trace.getTracer('test').startActiveSpan('caller', async (span) => {
        const response = await fetch(`${url}/v1/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ any: 'body' }) });
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
    const [otlp] = spanExportersFromEnv({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' });
    expect(otlp?.constructor.name).toBe('OTLPTraceExporter');
    expect(spanExportersFromEnv({ OTEL_TRACES_EXPORTER: 'console, otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toHaveLength(2);
    expect(() => spanExportersFromEnv({ OTEL_TRACES_EXPORTER: 'zipkin' })).toThrow(TelemetryConfigError);
    expect(() => spanExportersFromEnv({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'carrier-pigeon' })).toThrow(/carrier-pigeon.*http\/protobuf, grpc or http\/json/);
  });
});

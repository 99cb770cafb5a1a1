/**
 * OpenTelemetry tracing for every Berth process. Every entry point imports this module first, so
 * that the HTTP instrumentation patches node:http before fastify loads it: incoming requests then
 * continue the caller's trace (W3C traceparent), and every fetch (undici) carries it on.
 *
 * Off by default: unless OTEL_TRACES_EXPORTER names an exporter, nothing is registered and the
 * OpenTelemetry API stays a no-op. Configuration is the standard OTEL_* variables: the exporter
 * (`otlp` or `console`), OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL (`http/protobuf` by default, `grpc`,
 * `http/json`), OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT and _HEADERS (read by the OTLP exporters),
 * OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, OTEL_BSP_*, and
 * OTEL_SDK_DISABLED.
 */
import diagnostics from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import { context, trace } from '@opentelemetry/api';
import { getRPCMetadata, RPCType } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpGrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { envDetectorSync, Resource } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  NoopSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

/** Thrown when the OTEL_* variables ask for an exporter or protocol Berth does not ship. */
export class TelemetryConfigError extends Error {
  override name = 'TelemetryConfigError';
}

/** The exporters OTEL_TRACES_EXPORTER asks for; none when tracing is off. */
export function spanExportersFromEnv(env: NodeJS.ProcessEnv = process.env): SpanExporter[] {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return [];
  const names = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '' && name !== 'none');
  return [...new Set(names)].map((name) => {
    if (name === 'console') return new ConsoleSpanExporter();
    if (name !== 'otlp')
      throw new TelemetryConfigError(
        `OTEL_TRACES_EXPORTER: "${name}" is not an exporter Berth ships (otlp, console or none)`,
      );
    const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || 'http/protobuf';
    if (protocol === 'http/protobuf') return new OtlpProtoExporter();
    if (protocol === 'grpc') return new OtlpGrpcExporter();
    if (protocol === 'http/json') return new OtlpJsonExporter();
    throw new TelemetryConfigError(
      `OTEL_EXPORTER_OTLP_PROTOCOL: "${protocol}" is not an OTLP protocol (http/protobuf, grpc or http/json)`,
    );
  });
}

/** Probes and scrapes would fill every trace backend with noise: they get no spans. */
const UNTRACED_PATHS = /^\/(healthz|readyz|metrics)(\?|$)/;

interface Tracing {
  provider: NodeTracerProvider;
  /** Every span the process ends goes through it, the workflows' spans too (see workers/tracing.ts). */
  processor: SpanProcessor;
  resource: Resource;
  stop(): Promise<void>;
}

let tracing: Tracing | undefined;

/**
 * Starts tracing with these processors (tests pass an in-memory exporter's): registers the tracer
 * provider, the W3C propagators and the HTTP and fetch instrumentations. Once per process.
 */
export function startTracing(processors: SpanProcessor[]): void {
  if (tracing) throw new Error('tracing is already started in this process');
  const resource = Resource.default()
    .merge(new Resource({ 'service.name': defaultServiceName() }))
    .merge(envDetectorSync.detect());
  const provider = new NodeTracerProvider({ resource, spanProcessors: processors });
  provider.register();
  const unregister = registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (request: IncomingMessage) => UNTRACED_PATHS.test(request.url ?? ''),
      }),
      new UndiciInstrumentation(),
    ],
  });
  const handlerStarts = diagnostics.tracingChannel('fastify.request.handler').start;
  handlerStarts.subscribe(nameServerSpanAfterRoute);
  tracing = {
    provider,
    processor: provider.getActiveSpanProcessor(),
    resource,
    stop: async () => {
      handlerStarts.unsubscribe(nameServerSpanAfterRoute);
      unregister();
      await provider.shutdown();
    },
  };
}

/** `berth-coordinator`, `berth-query-node`, `berth-worker`…: from the entry point that runs; OTEL_SERVICE_NAME overrides it. */
function defaultServiceName(entry = process.argv[1] ?? ''): string {
  const match = /(?:services[/\\]([\w-]+)|(workers))[/\\]main\.[jt]s$/.exec(entry);
  const role = match?.[1] ?? (match?.[2] ? 'worker' : undefined);
  return role ? `berth-${role}` : 'berth';
}

/**
 * Fastify announces each route handler it runs; the HTTP instrumentation's server span then gets
 * the route (`POST /v1/scan`, not just `POST`), as OpenTelemetry's framework instrumentations do.
 */
function nameServerSpanAfterRoute(message: unknown): void {
  const metadata = getRPCMetadata(context.active());
  const url = (message as { route?: { url?: string } }).route?.url;
  if (metadata?.type === RPCType.HTTP && url) metadata.route = url;
}

/** Where the workflows' spans go (through the worker's sink): the process's processors, or nowhere when tracing is off. */
export function tracingSink(): { processor: SpanProcessor; resource: Resource } {
  return tracing
    ? { processor: tracing.processor, resource: tracing.resource }
    : { processor: new NoopSpanProcessor(), resource: Resource.empty() };
}

/** Exports what is still buffered and stops tracing; a process calls it before it exits. */
export async function stopTracing(): Promise<void> {
  const stopping = tracing;
  tracing = undefined;
  await stopping
    ?.stop()
    .catch((error: Error) => process.stderr.write(`tracing did not shut down cleanly: ${error.message}\n`));
}

/** The active trace, for log lines (pino's mixin): the same field names the Temporal SDK's interceptors log. */
export function traceLogFields(): { trace_id?: string; span_id?: string } {
  const span = trace.getSpan(context.active())?.spanContext();
  return span && trace.isSpanContextValid(span) ? { trace_id: span.traceId, span_id: span.spanId } : {};
}

// Started as the process loads, from its environment: before any other module opens a server.
try {
  const exporters = spanExportersFromEnv();
  if (exporters.length > 0) startTracing(exporters.map((exporter) => new BatchSpanProcessor(exporter)));
} catch (error) {
  if (!(error instanceof TelemetryConfigError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(78); // EX_CONFIG, as startService() does
}

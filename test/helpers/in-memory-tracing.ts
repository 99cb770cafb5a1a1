/**
 * Tracing into memory for a test file: import it FIRST (before anything loads fastify), as every
 * entry point imports services/common/telemetry.ts first. Every span this process ends lands in
 * `spans`, the workflows' too (through the worker's sink).
 */
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { startTracing } from '../../services/common/telemetry.js';

export const spans = new InMemorySpanExporter();
startTracing([new SimpleSpanProcessor(spans)]);

/** The finished spans of one trace. */
export const traceSpans = (traceId: string): ReadableSpan[] =>
  spans.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);

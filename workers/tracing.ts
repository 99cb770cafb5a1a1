/**
 * The worker's side of tracing, with the Temporal SDK's OpenTelemetry interceptors: workflows
 * continue the trace their start or update carried (the interceptor module bundled into the
 * workflow code), activities continue the workflow's (the activity interceptors), and the
 * workflows' spans leave the sandbox through a sink into this process's span processors. With
 * tracing off the sink drops them. Every bundle of Berth's workflows, and every worker or replayer
 * that runs one, uses these: the bundle's interceptors call the sink.
 */
import { createRequire } from 'node:module';
import type { ReplayWorkerOptions, WorkerOptions } from '@temporalio/worker';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/worker/index.js';
import { tracingSink } from '../services/common/telemetry.js';

/** For bundleWorkflowCode's `workflowInterceptorModules`. */
export const WORKFLOW_INTERCEPTOR_MODULES = [
  createRequire(import.meta.url).resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors'),
];

/** The sink the bundled workflow interceptors export their spans to (replay workers need it too). */
export function workflowTracingSinks(): NonNullable<ReplayWorkerOptions['sinks']> {
  const { processor, resource } = tracingSink();
  return { exporter: makeWorkflowExporter(processor, resource) };
}

/** Interceptors and sinks for Worker.create: activities continue their workflow's trace, workflows' spans are exported. */
export function workerTracingOptions(): Pick<WorkerOptions, 'interceptors' | 'sinks'> {
  return {
    interceptors: {
      activity: [
        (ctx) => ({
          inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
          outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
        }),
      ],
    },
    sinks: workflowTracingSinks(),
  };
}

/**
 * The Temporal client's side of tracing: every workflow start, update(-with-start), signal and
 * query a service sends carries the active trace in its headers (the SDK's OpenTelemetry
 * interceptor), so the workflow, and the activities it schedules, continue it. A no-op tracer's
 * spans when tracing is off.
 */
import type { ClientInterceptors } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry/lib/client/index.js';

export function tracingClientInterceptors(): ClientInterceptors {
  return { workflow: [new OpenTelemetryWorkflowClientInterceptor()] };
}

/**
 * A worker process's Temporal runtime, installed before its first connection: the SDK's log lines
 * (its own, and those of workflows and activities, with the trace ids its interceptors attach) go
 * out through pino as JSON, like every service's; and the SDK's metrics (task latencies, slots,
 * polls, sticky cache…) are served for Prometheus at `metricsAddress` when one is given (the worker
 * has no HTTP server of its own).
 */
import { Runtime, type RuntimeOptions } from '@temporalio/worker';
import type { LogLevel, LogMetadata, Logger } from '@temporalio/common';
import pino from 'pino';
import { loggerOptions } from '../services/common/logger.js';

/** Temporal's Logger interface over a pino logger. */
export function pinoTemporalLogger(log: pino.Logger): Logger {
  const at = (level: LogLevel) => (message: string, meta?: LogMetadata) =>
    log[level.toLowerCase() as pino.Level](meta ?? {}, message);
  return {
    log: (level, message, meta) => at(level)(message, meta),
    trace: at('TRACE'),
    debug: at('DEBUG'),
    info: at('INFO'),
    warn: at('WARN'),
    error: at('ERROR'),
  };
}

export interface WorkerRuntimeOptions {
  /** host:port where the SDK's Prometheus metrics are served (any path answers); none when absent. */
  metricsAddress?: string;
}

export function installWorkerRuntime(options: WorkerRuntimeOptions = {}): pino.Logger {
  const log = pino(loggerOptions('worker'));
  const telemetryOptions: RuntimeOptions['telemetryOptions'] = options.metricsAddress
    ? { metrics: { prometheus: { bindAddress: options.metricsAddress } } }
    : undefined;
  Runtime.install({ logger: pinoTemporalLogger(log), telemetryOptions });
  return log;
}

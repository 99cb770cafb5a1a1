/**
 * pino options shared by every service: JSON lines, level from BERTH_LOG_LEVEL, and the active
 * trace's ids on every line logged inside a traced request or step (nothing when tracing is off).
 */
import type { LoggerOptions } from 'pino';
import { DEFAULT_LOG_LEVEL } from './config.js';
import { traceLogFields } from './telemetry.js';

export function loggerOptions(service: string): LoggerOptions {
  return { name: service, level: process.env.BERTH_LOG_LEVEL ?? DEFAULT_LOG_LEVEL, mixin: traceLogFields };
}

/** pino options shared by every service: JSON lines, level from BERTH_LOG_LEVEL. */
import type { LoggerOptions } from 'pino';

export function loggerOptions(service: string): LoggerOptions {
  return { name: service, level: process.env.BERTH_LOG_LEVEL ?? 'info' };
}

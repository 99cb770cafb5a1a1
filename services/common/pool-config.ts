/** The heavy pool's configuration from the environment, shared by every process that may start its workflow. */
import { POOL_DEFAULTS, type PoolConfig } from '../../workflows/api.js';
import { envNumber } from './env.js';

/** Undefined when BERTH_HEAVY_GROUP is not set: no heavy pool. */
export function poolConfigFromEnv(): PoolConfig | undefined {
  const group = process.env.BERTH_HEAVY_GROUP;
  if (!group) return undefined;
  return {
    group,
    increment: envNumber('BERTH_HEAVY_INCREMENT', POOL_DEFAULTS.increment),
    maxReplicas: envNumber('BERTH_HEAVY_MAX_REPLICAS', POOL_DEFAULTS.maxReplicas),
    idleTimeoutMs: envNumber('BERTH_HEAVY_IDLE_TIMEOUT_MS', POOL_DEFAULTS.idleTimeoutMs),
    readinessWaitMs: envNumber('BERTH_HEAVY_READINESS_WAIT_MS', POOL_DEFAULTS.readinessWaitMs),
    readinessConfirmMs: envNumber('BERTH_HEAVY_READINESS_CONFIRM_MS', POOL_DEFAULTS.readinessConfirmMs),
    monitorSustainMs: envNumber('BERTH_HEAVY_MONITOR_SUSTAIN_MS', POOL_DEFAULTS.monitorSustainMs),
    maxConcurrency: envNumber('BERTH_HEAVY_MAX_CONCURRENCY', POOL_DEFAULTS.maxConcurrency),
    maxQueueSize: envNumber('BERTH_HEAVY_MAX_QUEUE_SIZE', POOL_DEFAULTS.maxQueueSize),
    launchDeadlineMs: envNumber('BERTH_HEAVY_LAUNCH_DEADLINE_MS', POOL_DEFAULTS.launchDeadlineMs),
    reportTtlMs: envNumber('BERTH_HEAVY_REPORT_TTL_MS', POOL_DEFAULTS.reportTtlMs),
  };
}

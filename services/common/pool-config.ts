/** The heavy pool's configuration from the environment, shared by every process that may start its workflow. */
import type { PoolConfig } from '../../workflows/api.js';
import { envNumber } from './env.js';

/** Undefined when BERTH_HEAVY_GROUP is not set: no heavy pool. */
export function poolConfigFromEnv(): PoolConfig | undefined {
  const group = process.env.BERTH_HEAVY_GROUP;
  if (!group) return undefined;
  return {
    group,
    increment: envNumber('BERTH_HEAVY_INCREMENT', 2),
    maxReplicas: envNumber('BERTH_HEAVY_MAX_REPLICAS', 4),
    idleTimeoutMs: envNumber('BERTH_HEAVY_IDLE_TIMEOUT_MS', 300_000),
    readinessPollMs: envNumber('BERTH_HEAVY_READINESS_POLL_MS', 2_000),
    monitorSustainMs: envNumber('BERTH_HEAVY_MONITOR_SUSTAIN_MS', 30_000),
    monitorPollMs: envNumber('BERTH_HEAVY_MONITOR_POLL_MS', 10_000),
  };
}

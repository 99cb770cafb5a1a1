/** The serving autoscaler's configuration from the environment (opt-in), shared by coordinators, the controller and workers. */
import { SERVING_SCALER_DEFAULTS, type ServingScalerConfig } from '../../workflows/api.js';
import { envNumber, envString } from './env.js';

/** Undefined unless BERTH_SERVING_AUTOSCALE is 1 or true: the serving group keeps its size. */
export function servingScalerConfigFromEnv(): ServingScalerConfig | undefined {
  const optIn = process.env.BERTH_SERVING_AUTOSCALE ?? '';
  if (!['1', 'true'].includes(optIn)) return undefined;
  return {
    group: envString('BERTH_SERVING_GROUP', 'serving'),
    floor: envNumber('BERTH_SERVING_MIN_REPLICAS', SERVING_SCALER_DEFAULTS.floor),
    max: envNumber('BERTH_SERVING_MAX_REPLICAS', SERVING_SCALER_DEFAULTS.max),
    waitingThreshold: envNumber('BERTH_SERVING_WAITING_THRESHOLD', SERVING_SCALER_DEFAULTS.waitingThreshold),
    sustainMs: envNumber('BERTH_SERVING_SUSTAIN_MS', SERVING_SCALER_DEFAULTS.sustainMs),
    idleMs: envNumber('BERTH_SERVING_IDLE_MS', SERVING_SCALER_DEFAULTS.idleMs),
    reportTtlMs: envNumber('BERTH_SERVING_REPORT_TTL_MS', SERVING_SCALER_DEFAULTS.reportTtlMs),
  };
}

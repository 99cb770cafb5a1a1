/** Calls the controller: launch a heavy pool and read its status, usage and preflight, and the serving autoscaler's status. */
import { callJson } from '../common/http-client.js';
import type { LaunchAccepted, NodeUsage, PoolStatusAnswer, PreflightReport, ServingScalerStatus } from './api.js';

export type { LaunchAccepted, NodeUsage, PoolStatusAnswer, PreflightReport, ServingScalerStatus };

/** A preflight runs on a worker and may take minutes. */
const PREFLIGHT_TIMEOUT_MS = 600_000;

export class ControllerClient {
  constructor(
    readonly url: string,
    /** Needed for launches and preflights. */
    private readonly token?: string,
  ) {}

  /** Raises the pool's target (raise-only; rounded up to its increment, capped at its maximum). */
  launch(group: string, target: number): Promise<LaunchAccepted> {
    return callJson(`${this.url}/v1/pools/${encodeURIComponent(group)}/launch`, {
      body: { target },
      token: this.token,
      timeoutMs: 60_000,
    });
  }

  poolStatus(group: string): Promise<PoolStatusAnswer> {
    return callJson(`${this.url}/v1/pools/${encodeURIComponent(group)}/status`, { timeoutMs: 30_000 });
  }

  poolUsage(group: string): Promise<NodeUsage> {
    return callJson(`${this.url}/v1/pools/${encodeURIComponent(group)}/usage`, { timeoutMs: 30_000 });
  }

  preflight(group: string): Promise<PreflightReport> {
    return callJson(`${this.url}/v1/pools/${encodeURIComponent(group)}/preflight`, {
      token: this.token,
      timeoutMs: PREFLIGHT_TIMEOUT_MS,
    });
  }

  servingAutoscaler(group: string): Promise<ServingScalerStatus> {
    return callJson(`${this.url}/v1/serving/${encodeURIComponent(group)}/autoscaler`, { timeoutMs: 30_000 });
  }
}

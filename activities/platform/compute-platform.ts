/**
 * The compute platform port: the one write the heavy pool makes (a compute group's replica target)
 * and what it reads from the platform: how many of the group's pods run (only a count, never
 * readiness), why the others do not in the platform's own words, and a preflight of what would keep
 * the group from ever running. Drivers: Kubernetes (a workload or an operator's custom resource) and
 * local processes.
 */
import type { PreflightReport } from '../../core/preflight.js';

export interface ComputePlatform {
  readonly kind: PreflightReport['platform'];
  /** Sets the group's replica target. Idempotent: setting the current target writes nothing. */
  setReplicas(group: string, replicas: number): Promise<{ changed: boolean; previous: number }>;
  /** The group's replica target as the platform holds it now. */
  replicas(group: string): Promise<number>;
  /** Pods of the group in the Running phase. */
  runningPods(group: string): Promise<number>;
  /**
   * Why pods of the group are not running, quoted from the platform itself (on Kubernetes the
   * scheduler's FailedScheduling and the cluster autoscaler's NotTriggerScaleUp events, or a pod's
   * own conditions); undefined when the platform says nothing. Advisory: it never throws.
   */
  why(group: string): Promise<string | undefined>;
  /** Checks what would keep the group from ever running (requests against nodes, placement, rights). */
  preflight(group: string): Promise<PreflightReport>;
}

/** Thrown when the platform has no compute group by that name (for Kubernetes: not in the custom resource). */
export class ComputeGroupNotFoundError extends Error {
  override name = 'ComputeGroupNotFoundError';
}

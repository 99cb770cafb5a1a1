/**
 * The compute platform port: the one write the heavy pool makes (a compute group's replica target)
 * and the one thing it reads from the platform (how many of the group's pods run: only a count,
 * never readiness). Drivers: Kubernetes (the operator's custom resource) and local processes.
 */
export interface ComputePlatform {
  /** Sets the group's replica target. Idempotent: setting the current target writes nothing. */
  setReplicas(group: string, replicas: number): Promise<{ changed: boolean; previous: number }>;
  /** The group's replica target as the platform holds it now. */
  replicas(group: string): Promise<number>;
  /** Pods of the group in the Running phase. */
  runningPods(group: string): Promise<number>;
}

/** Thrown when the platform has no compute group by that name (for Kubernetes: not in the custom resource). */
export class ComputeGroupNotFoundError extends Error {
  override name = 'ComputeGroupNotFoundError';
}

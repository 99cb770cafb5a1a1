/** The contract of the heavy pool's reconciler workflow: its input, result and schedule. */

export interface ReconcileInput {
  /** The groups a pool workflow scales. */
  groups: string[];
}

export interface ReconcileResult {
  /** Groups found with replicas and no pool workflow running, now patched to zero. */
  parked: { group: string; replicas: number }[];
}

export const RECONCILER_SCHEDULE_ID = 'heavy-pool-reconciler';

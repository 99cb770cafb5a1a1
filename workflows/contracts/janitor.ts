/** The contract of the janitor workflow: its input, result and schedule. */

export interface JanitorInput {
  /** Retired objects and uncommitted uploads younger than this are kept. @default 3600000 */
  graceMs?: number;
  /** A sweep whose worker stops heartbeating this long is retried on another. @default 30000 */
  heartbeatTimeoutMs?: number;
}

export const JANITOR_DEFAULTS = { graceMs: 3_600_000, heartbeatTimeoutMs: 30_000 } satisfies Required<JanitorInput>;

/**
 * What one sweep deleted: how many, and the first of them to read in the Web UI. A sweep may
 * delete millions; a result that listed them all would pass Temporal's 2 MiB payload limit.
 */
export interface JanitorSweep {
  deleted: number;
  /** At most JANITOR_SWEEP_NAMED: segment ids for retired objects, object keys for orphans. */
  first: string[];
}

export const JANITOR_SWEEP_NAMED = 100;

export interface JanitorResult {
  retired: JanitorSweep;
  orphans: JanitorSweep;
}

export const JANITOR_SCHEDULE_ID = 'janitor';

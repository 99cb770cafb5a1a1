/** The contract of the janitor workflow: its input, result and schedule. */

export interface JanitorInput {
  /** Retired objects and uncommitted uploads younger than this are kept. @default 3600000 */
  graceMs?: number;
  /** A sweep whose worker stops heartbeating this long is retried on another. @default 30000 */
  heartbeatTimeoutMs?: number;
}

export const JANITOR_DEFAULTS = { graceMs: 3_600_000, heartbeatTimeoutMs: 30_000 } satisfies Required<JanitorInput>;

export interface JanitorResult {
  retiredDeleted: string[];
  orphansDeleted: string[];
}

export const JANITOR_SCHEDULE_ID = 'janitor';

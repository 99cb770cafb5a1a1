/** The contract of the retention workflow: its result and schedule. */

/** What a run retired: totals only, so the result stays the same size however many segments there are. */
export interface RetentionResult {
  /** Tables with a retention period, each looked at once. */
  tables: number;
  segments: number;
  bytes: number;
  rows: number;
}

export const RETENTION_SCHEDULE_ID = 'retention';

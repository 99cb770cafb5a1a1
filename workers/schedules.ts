/**
 * The Temporal Schedules that run Berth's periodic work: one merge schedule per table and one
 * janitor. Creating one that exists is a no-op, so callers may ensure them as often as they like.
 */
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import { JANITOR_SCHEDULE_ID, mergeScheduleId, SEARCH_ATTRIBUTES, TASK_QUEUE } from '../workflows/api.js';
import type { janitorWorkflow, tableMergeWorkflow } from '../workflows/index.js';

export interface ScheduleConfig {
  /** How often each table is merged. @default 300000 */
  mergeEveryMs?: number;
  /** Fewest level-0 segments of a partition worth a merge. @default 10 */
  mergeMinInputs?: number;
  /** Most segments one merge takes. @default 100 */
  mergeMaxInputs?: number;
  /** How often the janitor runs. @default 900000 */
  janitorEveryMs?: number;
  /** Retired objects and uncommitted uploads younger than this are kept. @default 3600000 */
  janitorGraceMs?: number;
  taskQueue?: string;
}

async function ensure(create: () => Promise<unknown>): Promise<boolean> {
  try {
    await create();
    return true;
  } catch (error) {
    if (error instanceof ScheduleAlreadyRunning) return false;
    throw error;
  }
}

/** Ensures the table's merge schedule; true when it was created now. */
export function ensureMergeSchedule(client: Client, table: string, config: ScheduleConfig = {}): Promise<boolean> {
  return ensure(() =>
    client.schedule.create({
      scheduleId: mergeScheduleId(table),
      spec: { intervals: [{ every: config.mergeEveryMs ?? 300_000 }] },
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
      action: {
        type: 'startWorkflow',
        workflowType: 'tableMergeWorkflow' satisfies (typeof tableMergeWorkflow)['name'],
        workflowId: `merge-${table}-scheduled`,
        taskQueue: config.taskQueue ?? TASK_QUEUE,
        args: [{ table, minInputs: config.mergeMinInputs ?? 10, maxInputs: config.mergeMaxInputs ?? 100 }],
        typedSearchAttributes: [{ key: SEARCH_ATTRIBUTES.table, value: table }],
      },
    }),
  );
}

/** Ensures the janitor's schedule; true when it was created now. */
export function ensureJanitorSchedule(client: Client, config: ScheduleConfig = {}): Promise<boolean> {
  return ensure(() =>
    client.schedule.create({
      scheduleId: JANITOR_SCHEDULE_ID,
      spec: { intervals: [{ every: config.janitorEveryMs ?? 900_000 }] },
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
      action: {
        type: 'startWorkflow',
        workflowType: 'janitorWorkflow' satisfies (typeof janitorWorkflow)['name'],
        workflowId: 'janitor-scheduled',
        taskQueue: config.taskQueue ?? TASK_QUEUE,
        args: [{ graceMs: config.janitorGraceMs ?? 3_600_000 }],
      },
    }),
  );
}

/**
 * The Schedule that runs the heavy pool's reconciler (workflows/pool-reconciler.ts). Creating it
 * when it exists is a no-op; its interval follows configuration (an existing schedule with another
 * interval is updated).
 */
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import { TASK_QUEUE } from '../workflows/contracts/shared.js';
import { RECONCILER_SCHEDULE_ID } from '../workflows/contracts/pool-reconciler.js';
import type { poolReconcilerWorkflow } from '../workflows/index.js';

/** How often the reconciler runs unless the worker is told otherwise. */
export const DEFAULT_RECONCILE_EVERY_MS = 60_000;

export interface ReconcilerScheduleConfig {
  groups: string[];
  /** @default 60000 */
  everyMs?: number;
  taskQueue?: string;
  /** @default RECONCILER_SCHEDULE_ID */
  scheduleId?: string;
}

export async function ensureReconcilerSchedule(client: Client, config: ReconcilerScheduleConfig): Promise<void> {
  const everyMs = config.everyMs ?? DEFAULT_RECONCILE_EVERY_MS;
  const scheduleId = config.scheduleId ?? RECONCILER_SCHEDULE_ID;
  const action = {
    type: 'startWorkflow' as const,
    workflowType: 'poolReconcilerWorkflow' satisfies (typeof poolReconcilerWorkflow)['name'],
    workflowId: `${scheduleId}-run`,
    taskQueue: config.taskQueue ?? TASK_QUEUE,
    args: [{ groups: config.groups }],
  };
  try {
    await client.schedule.create({
      scheduleId,
      spec: { intervals: [{ every: everyMs }] },
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
      action,
    });
  } catch (error) {
    if (!(error instanceof ScheduleAlreadyRunning)) throw error;
    await client.schedule
      .getHandle(scheduleId)
      .update((previous) => ({ ...previous, spec: { intervals: [{ every: everyMs }] }, action }));
  }
}

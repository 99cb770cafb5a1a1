/**
 * The Temporal Schedules that run Berth's periodic work: one merge schedule per table and one
 * janitor. They follow the configuration: each sync creates a missing schedule, updates one whose
 * interval, inputs, task queue or catch-up window differ from what is configured (describe,
 * compare, update), and deletes the merge schedule of a table meta no longer lists. Syncing often
 * is cheap: a schedule that matches is only described.
 */
import { isDeepStrictEqual } from 'node:util';
import {
  ScheduleAlreadyRunning,
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  type Client,
  type ScheduleDescription,
  type ScheduleOptionsStartWorkflowAction,
} from '@temporalio/client';
import { MERGE_TASK_QUEUE, SEARCH_ATTRIBUTES } from '../workflows/contracts/shared.js';
import { JANITOR_DEFAULTS, JANITOR_SCHEDULE_ID } from '../workflows/contracts/janitor.js';
import { MERGE_DEFAULTS, mergeScheduleId } from '../workflows/contracts/segment-merge.js';
import { RETENTION_SCHEDULE_ID } from '../workflows/contracts/retention.js';
import type { janitorWorkflow, retentionWorkflow, tableMergeWorkflow } from '../workflows/index.js';

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
  /** How often retention retires the segments past their table's retention period. @default 3600000 */
  retentionEveryMs?: number;
  /**
   * Runs missed while Temporal or the workers were down are taken afterwards only when missed by
   * less than this: a run older than one interval is superseded by the next one anyway.
   * @default each schedule's interval, at least 60000
   */
  catchupWindowMs?: number;
  /** The task queue the scheduled workflows run on; it also scopes which schedules a sync may delete. @default MERGE_TASK_QUEUE */
  taskQueue?: string;
}

/** The defaults of the settings above; the worker's configuration (config.ts) takes them from here. */
export const SCHEDULE_DEFAULTS = {
  mergeEveryMs: 300_000,
  mergeMinInputs: 10,
  mergeMaxInputs: MERGE_DEFAULTS.maxInputs,
  janitorEveryMs: 900_000,
  janitorGraceMs: JANITOR_DEFAULTS.graceMs,
  retentionEveryMs: 3_600_000,
};

export type ScheduleChange = 'created' | 'updated' | 'unchanged';

export interface ScheduleSyncResult {
  created: string[];
  updated: string[];
  deleted: string[];
}

/** One schedule as the configuration wants it. */
interface WantedSchedule {
  scheduleId: string;
  everyMs: number;
  catchupWindowMs: number;
  action: ScheduleOptionsStartWorkflowAction<
    typeof tableMergeWorkflow | typeof janitorWorkflow | typeof retentionWorkflow
  >;
  /** Lets a later sync tell Berth's merge schedules apart (listings carry the memo, not the action). */
  memo?: Record<string, string>;
}

const catchupFor = (everyMs: number, config: ScheduleConfig) => config.catchupWindowMs ?? Math.max(everyMs, 60_000);

function mergeSchedule(table: string, config: ScheduleConfig): WantedSchedule {
  const everyMs = config.mergeEveryMs ?? SCHEDULE_DEFAULTS.mergeEveryMs;
  return {
    scheduleId: mergeScheduleId(table),
    everyMs,
    catchupWindowMs: catchupFor(everyMs, config),
    action: {
      type: 'startWorkflow',
      workflowType: 'tableMergeWorkflow' satisfies (typeof tableMergeWorkflow)['name'],
      workflowId: `merge-${table}-scheduled`,
      taskQueue: config.taskQueue ?? MERGE_TASK_QUEUE,
      args: [
        {
          table,
          minInputs: config.mergeMinInputs ?? SCHEDULE_DEFAULTS.mergeMinInputs,
          maxInputs: config.mergeMaxInputs ?? SCHEDULE_DEFAULTS.mergeMaxInputs,
        },
      ],
      typedSearchAttributes: [{ key: SEARCH_ATTRIBUTES.table, value: table }],
    },
    memo: { berthTable: table },
  };
}

function janitorSchedule(config: ScheduleConfig): WantedSchedule {
  const everyMs = config.janitorEveryMs ?? SCHEDULE_DEFAULTS.janitorEveryMs;
  return {
    scheduleId: JANITOR_SCHEDULE_ID,
    everyMs,
    catchupWindowMs: catchupFor(everyMs, config),
    action: {
      type: 'startWorkflow',
      workflowType: 'janitorWorkflow' satisfies (typeof janitorWorkflow)['name'],
      workflowId: 'janitor-scheduled',
      taskQueue: config.taskQueue ?? MERGE_TASK_QUEUE,
      args: [{ graceMs: config.janitorGraceMs ?? SCHEDULE_DEFAULTS.janitorGraceMs }],
    },
  };
}

function retentionSchedule(config: ScheduleConfig): WantedSchedule {
  const everyMs = config.retentionEveryMs ?? SCHEDULE_DEFAULTS.retentionEveryMs;
  return {
    scheduleId: RETENTION_SCHEDULE_ID,
    everyMs,
    catchupWindowMs: catchupFor(everyMs, config),
    action: {
      type: 'startWorkflow',
      workflowType: 'retentionWorkflow' satisfies (typeof retentionWorkflow)['name'],
      workflowId: 'retention-scheduled',
      taskQueue: config.taskQueue ?? MERGE_TASK_QUEUE,
      args: [],
    },
  };
}

/** What of a described schedule Berth configures, in the shape `wanted` gives it. */
const configured = (d: ScheduleDescription) => ({
  everyMs: d.spec.intervals?.map((i) => i.every),
  catchupWindowMs: d.policies.catchupWindow,
  overlap: d.policies.overlap,
  workflowType: d.action.workflowType,
  workflowId: d.action.workflowId,
  taskQueue: d.action.taskQueue,
  args: d.action.args,
});
const wantedShape = (w: WantedSchedule) => ({
  everyMs: [w.everyMs],
  catchupWindowMs: w.catchupWindowMs,
  overlap: ScheduleOverlapPolicy.SKIP,
  workflowType: w.action.workflowType,
  workflowId: w.action.workflowId,
  taskQueue: w.action.taskQueue,
  args: w.action.args,
});

/** Creates the schedule, or updates it when what Berth configures differs from the configuration. */
async function ensureSchedule(client: Client, wanted: WantedSchedule): Promise<ScheduleChange> {
  const spec = { intervals: [{ every: wanted.everyMs }] };
  const policies = { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: wanted.catchupWindowMs };
  const handle = client.schedule.getHandle(wanted.scheduleId);
  for (;;) {
    let description: ScheduleDescription;
    try {
      description = await handle.describe();
    } catch (error) {
      if (!(error instanceof ScheduleNotFoundError)) throw error;
      try {
        await client.schedule.create({
          scheduleId: wanted.scheduleId,
          spec,
          policies,
          action: wanted.action,
          memo: wanted.memo,
        });
        return 'created';
      } catch (raced) {
        if (raced instanceof ScheduleAlreadyRunning) continue; // another worker created it: compare with that one
        throw raced;
      }
    }
    if (isDeepStrictEqual(configured(description), wantedShape(wanted))) return 'unchanged';
    await handle.update((previous) => ({
      ...previous,
      spec,
      policies: { ...previous.policies, ...policies },
      action: wanted.action,
    }));
    return 'updated';
  }
}

/** Ensures the table's merge schedule follows the configuration. */
export function ensureMergeSchedule(
  client: Client,
  table: string,
  config: ScheduleConfig = {},
): Promise<ScheduleChange> {
  return ensureSchedule(client, mergeSchedule(table, config));
}

/** Ensures the janitor's schedule follows the configuration. */
export function ensureJanitorSchedule(client: Client, config: ScheduleConfig = {}): Promise<ScheduleChange> {
  return ensureSchedule(client, janitorSchedule(config));
}

/** Ensures retention's schedule follows the configuration. */
export function ensureRetentionSchedule(client: Client, config: ScheduleConfig = {}): Promise<ScheduleChange> {
  return ensureSchedule(client, retentionSchedule(config));
}

/**
 * Brings every schedule in line with the configuration and the tables meta lists: the janitor's,
 * retention's,
 * one merge schedule per table, and none for a table that is gone. Only merge schedules whose
 * workflows run on this configuration's task queue are deleted: others belong to other deployments.
 */
export async function syncSchedules(
  client: Client,
  tables: string[],
  config: ScheduleConfig = {},
): Promise<ScheduleSyncResult> {
  const result: ScheduleSyncResult = { created: [], updated: [], deleted: [] };
  const record = (scheduleId: string, change: ScheduleChange) => {
    if (change !== 'unchanged') result[change].push(scheduleId);
  };
  record(JANITOR_SCHEDULE_ID, await ensureJanitorSchedule(client, config));
  record(RETENTION_SCHEDULE_ID, await ensureRetentionSchedule(client, config));
  for (const table of tables) record(mergeScheduleId(table), await ensureMergeSchedule(client, table, config));

  const listed = new Set(tables);
  const taskQueue = config.taskQueue ?? MERGE_TASK_QUEUE;
  for await (const summary of client.schedule.list()) {
    const table = summary.memo?.berthTable;
    if (typeof table !== 'string' || listed.has(table) || summary.scheduleId !== mergeScheduleId(table)) continue;
    const handle = client.schedule.getHandle(summary.scheduleId);
    try {
      if ((await handle.describe()).action.taskQueue !== taskQueue) continue;
      await handle.delete();
      result.deleted.push(summary.scheduleId);
    } catch (error) {
      if (!(error instanceof ScheduleNotFoundError)) throw error; // deleted meanwhile: the listing lags
    }
  }
  return result;
}

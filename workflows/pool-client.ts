/**
 * How routing code talks to a heavy pool, without importing worker code: launch it, report a
 * coordinator's heavy queries and read what it may do, read the pool's status. Every write starts
 * the pool's entity workflow if it is not running (update-with-start, USE_EXISTING), so concurrent
 * callers coalesce onto one execution.
 */
import { WithStartWorkflowOperation, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { nodeHoursNow, type NodeUsage } from '../core/node-hours.js';
import { SEARCH_ATTRIBUTES, TASK_QUEUE } from './contracts/shared.js';
import {
  admissionQuery,
  launchUpdate,
  parkedStatus,
  poolSettings,
  poolSummary,
  poolWorkflowId,
  reportDemandUpdate,
  statusQuery,
  usageQuery,
  type AdmissionAnswer,
  type DemandReport,
  type LaunchAccepted,
  type PoolConfig,
  type PoolStatus,
} from './contracts/heavy-pool.js';
import { preflightWorkflowId, type PreflightReport } from './contracts/preflight.js';
import type { heavyPoolWorkflow } from './heavy-pool.js';
import type { preflightWorkflow } from './preflight.js';

export interface PoolClientOptions {
  client: Client;
  config: PoolConfig;
  /** @default 'berth' */
  taskQueue?: string;
}

const startOperation = ({ config, taskQueue }: PoolClientOptions) =>
  new WithStartWorkflowOperation<typeof heavyPoolWorkflow>('heavyPoolWorkflow', {
    workflowId: poolWorkflowId(config.group),
    taskQueue: taskQueue ?? TASK_QUEUE,
    args: [{ config }],
    workflowIdConflictPolicy: 'USE_EXISTING',
    typedSearchAttributes: [{ key: SEARCH_ATTRIBUTES.group, value: config.group }],
    staticSummary: poolSummary(poolSettings(config)),
  });

/** Raises the pool's target (raise-only, rounded to its increment, capped); answers with the accepted target. */
export async function launchPool(options: PoolClientOptions, target: number): Promise<LaunchAccepted> {
  return await options.client.workflow.executeUpdateWithStart(launchUpdate, {
    args: [{ target, group: options.config.group }],
    startWorkflowOperation: startOperation(options),
  });
}

/** Reports a coordinator's heavy queries (absolute counts); answers with what it may do now. */
export async function reportDemand(options: PoolClientOptions, report: DemandReport): Promise<AdmissionAnswer> {
  return await options.client.workflow.executeUpdateWithStart(reportDemandUpdate, {
    args: [report],
    startWorkflowOperation: startOperation(options),
  });
}

/** What a coordinator may do now, read without writing history. */
export async function readAdmission(
  options: Pick<PoolClientOptions, 'client' | 'config'>,
  coordinator: string,
): Promise<AdmissionAnswer> {
  return await options.client.workflow
    .getHandle(poolWorkflowId(options.config.group))
    .query(admissionQuery, coordinator);
}

/**
 * The pool's status; a pool that never ran reads as parked at zero, not as a fault. Node-hours are
 * counted here, with this clock: a workflow's clock stands still between its tasks.
 */
export async function poolStatus(
  options: Pick<PoolClientOptions, 'client'> & { group: string; config?: PoolConfig },
): Promise<PoolStatus> {
  try {
    const status = await options.client.workflow.getHandle(poolWorkflowId(options.group)).query(statusQuery);
    return status.usage ? { ...status, nodeHours: nodeHoursNow(status.usage, Date.now()) } : status;
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error;
    return {
      ...parkedStatus(poolSettings(options.config ?? { group: options.group })),
      nodeHours: { today: 0, month: 0 },
    };
  }
}

/** The pool's node-hours ledger (every kept day); empty for a pool that never ran. */
export async function poolUsage(options: Pick<PoolClientOptions, 'client'> & { group: string }): Promise<NodeUsage> {
  try {
    return await options.client.workflow.getHandle(poolWorkflowId(options.group)).query(usageQuery);
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error;
    return { days: {} };
  }
}

/** Runs a preflight of the group on a worker (which holds the platform's credentials); concurrent callers share one run. */
export async function runPreflight(
  options: Pick<PoolClientOptions, 'client' | 'taskQueue'> & { group: string },
): Promise<PreflightReport> {
  return await options.client.workflow.execute<typeof preflightWorkflow>('preflightWorkflow', {
    workflowId: preflightWorkflowId(options.group),
    taskQueue: options.taskQueue ?? TASK_QUEUE,
    args: [{ group: options.group }],
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowExecutionTimeout: '3 minutes',
  });
}

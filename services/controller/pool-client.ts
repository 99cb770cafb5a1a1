/**
 * How routing code talks to a heavy pool, without importing worker code: launch it, run a query
 * on it, read its status. Every call starts the pool's entity workflow if it is not running
 * (update-with-start, USE_EXISTING), so concurrent callers coalesce onto one execution.
 */
import { WithStartWorkflowOperation, WorkflowNotFoundError, type Client } from '@temporalio/client';
import {
  launchUpdate,
  parkedStatus,
  poolWorkflowId,
  runQueryUpdate,
  SEARCH_ATTRIBUTES,
  statusQuery,
  TASK_QUEUE,
  type HeavyQueryRequest,
  type HeavyQueryResult,
  type LaunchAccepted,
  type PoolConfig,
  type PoolStatus,
} from '../../workflows/api.js';
import type { heavyPoolWorkflow } from '../../workflows/heavy-pool.js';

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
  });

/** Raises the pool's target (raise-only, rounded to its increment, capped); answers with the accepted target. */
export async function launchPool(options: PoolClientOptions, target: number): Promise<LaunchAccepted> {
  return await options.client.workflow.executeUpdateWithStart(launchUpdate, {
    args: [{ target, group: options.config.group }],
    startWorkflowOperation: startOperation(options),
  });
}

/** Runs a heavy query on the pool, launching it first if it is parked; resolves with the result. */
export async function runOnPool(options: PoolClientOptions, request: HeavyQueryRequest): Promise<HeavyQueryResult> {
  return await options.client.workflow.executeUpdateWithStart(runQueryUpdate, {
    args: [request],
    startWorkflowOperation: startOperation(options),
  });
}

/** The pool's status; a pool that never ran reads as parked at zero, not as a fault. */
export async function poolStatus(options: Pick<PoolClientOptions, 'client'> & { group: string }): Promise<PoolStatus> {
  try {
    return await options.client.workflow.getHandle(poolWorkflowId(options.group)).query(statusQuery);
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error;
    return parkedStatus(options.group);
  }
}

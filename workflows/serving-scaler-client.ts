/**
 * How coordinators and the controller talk to the serving autoscaler's workflow without importing
 * worker code: report a coordinator's serving load (a signal that starts the workflow if needed),
 * and read its status.
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { TASK_QUEUE } from './contracts/shared.js';
import {
  servingLoadSignal,
  servingScalerSettings,
  servingScalerStatusQuery,
  servingScalerWorkflowId,
  type ServingLoadReport,
  type ServingScalerConfig,
  type ServingScalerStatus,
} from './contracts/serving-scaler.js';
import type { servingScalerWorkflow } from './serving-scaler.js';

export interface ServingScalerClientOptions {
  client: Client;
  config: ServingScalerConfig;
  /** @default 'berth' */
  taskQueue?: string;
}

export async function reportServingLoad(options: ServingScalerClientOptions, report: ServingLoadReport): Promise<void> {
  await options.client.workflow.signalWithStart<typeof servingScalerWorkflow, [ServingLoadReport]>(
    'servingScalerWorkflow',
    {
      workflowId: servingScalerWorkflowId(options.config.group),
      taskQueue: options.taskQueue ?? TASK_QUEUE,
      args: [{ config: options.config }],
      signal: servingLoadSignal,
      signalArgs: [report],
    },
  );
}

/** The autoscaler's status; one that never ran reads as its floor and maximum with nothing done. */
export async function servingScalerStatus(
  options: Pick<ServingScalerClientOptions, 'client' | 'config'>,
): Promise<ServingScalerStatus> {
  try {
    return await options.client.workflow
      .getHandle(servingScalerWorkflowId(options.config.group))
      .query(servingScalerStatusQuery);
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error;
    const settings = servingScalerSettings(options.config);
    return {
      group: settings.group,
      replicas: 0,
      floor: settings.floor,
      max: settings.max,
      running: 0,
      waiting: 0,
      coordinators: 0,
      steps: [],
    };
  }
}

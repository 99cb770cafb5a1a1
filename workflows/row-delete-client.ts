/** How the CLI and the workers start a delete's workflow, or find the run already going. */
import { WorkflowExecutionAlreadyStartedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { rowDeleteWorkflowId, type RowDeleteTask } from './contracts/row-delete.js';
import type { rowDeleteWorkflow } from './row-delete.js';

export async function startRowDelete(
  client: Client,
  task: RowDeleteTask,
  taskQueue: string,
): Promise<WorkflowHandle<typeof rowDeleteWorkflow>> {
  const workflowId = rowDeleteWorkflowId(task);
  const { id, table, incarnation, predicate, from, to } = task; // the task alone, whatever else the record holds
  try {
    return await client.workflow.start<typeof rowDeleteWorkflow>('rowDeleteWorkflow', {
      taskQueue,
      workflowId,
      args: [{ id, table, incarnation, predicate, from, to }],
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    return client.workflow.getHandle<typeof rowDeleteWorkflow>(workflowId);
  }
}

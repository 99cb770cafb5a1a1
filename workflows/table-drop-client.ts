/** How the CLI and the workers start a dropped table's workflow, or find the run already going. */
import { WorkflowExecutionAlreadyStartedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { tableDropWorkflowId, type TableDrop } from './contracts/table-drop.js';
import type { tableDropWorkflow } from './table-drop.js';

export async function startTableDrop(
  client: Client,
  drop: TableDrop,
  taskQueue: string,
): Promise<WorkflowHandle<typeof tableDropWorkflow>> {
  const workflowId = tableDropWorkflowId(drop);
  try {
    return await client.workflow.start<typeof tableDropWorkflow>('tableDropWorkflow', {
      taskQueue,
      workflowId,
      args: [drop],
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    return client.workflow.getHandle<typeof tableDropWorkflow>(workflowId);
  }
}

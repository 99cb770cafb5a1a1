/** Reading what a workflow wrote into its history, for tests that hold Berth inside Temporal's limits. */
import type { Client } from '@temporalio/client';

/** Every run of a workflow id (continue-as-new makes several). */
export async function runsOf(client: Client, workflowId: string): Promise<string[]> {
  const runs: string[] = [];
  for await (const run of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runs.push(run.runId);
  return runs;
}

/** Payloads larger than `limit` bytes in any run's history: event type and size. */
export async function payloadsOver(client: Client, workflowId: string, limit: number): Promise<{ runId: string; event: string; bytes: number }[]> {
  const found: { runId: string; event: string; bytes: number }[] = [];
  for (const runId of await runsOf(client, workflowId)) {
    const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    for (const event of history.events ?? []) {
      walk(event, (bytes) => {
        if (bytes > limit) found.push({ runId, event: String(event.eventType), bytes });
      });
    }
  }
  return found;
}

/** Calls `sized` with the data size of every payload (an object with `metadata` and `data`) in the tree. */
function walk(tree: unknown, sized: (bytes: number) => void): void {
  if (tree === null || typeof tree !== 'object' || ArrayBuffer.isView(tree)) return;
  const node = tree as { metadata?: unknown; data?: unknown };
  if (node.metadata && node.data instanceof Uint8Array) sized(node.data.byteLength);
  for (const value of Object.values(tree)) walk(value, sized);
}

/** Reading what a workflow wrote into its history, for tests that hold Berth inside Temporal's limits. */
import type { Client } from '@temporalio/client';
import pLimit from 'p-limit';

/** Every run of a workflow id (continue-as-new makes several). */
export async function runsOf(client: Client, workflowId: string): Promise<string[]> {
  const runs: string[] = [];
  for await (const run of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runs.push(run.runId);
  return runs;
}

export interface OversizedPayload {
  workflowId: string;
  runId: string;
  event: string;
  bytes: number;
}

/** Payloads larger than `limit` bytes in any run's history of one workflow id. */
export async function payloadsOver(client: Client, workflowId: string, limit: number): Promise<OversizedPayload[]> {
  const found: OversizedPayload[] = [];
  for (const runId of await runsOf(client, workflowId))
    found.push(...(await runPayloadsOver(client, workflowId, runId, limit)));
  return found;
}

/** Payloads larger than `limit` bytes in every history the namespace holds (the test run's, at its end). */
export async function allPayloadsOver(
  client: Client,
  limit: number,
): Promise<{ runs: number; oversized: OversizedPayload[] }> {
  const limitRuns = pLimit(8);
  const checks: Promise<OversizedPayload[]>[] = [];
  for await (const run of client.workflow.list())
    checks.push(limitRuns(() => runPayloadsOver(client, run.workflowId, run.runId, limit)));
  return { runs: checks.length, oversized: (await Promise.all(checks)).flat() };
}

async function runPayloadsOver(
  client: Client,
  workflowId: string,
  runId: string,
  limit: number,
): Promise<OversizedPayload[]> {
  const found: OversizedPayload[] = [];
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  for (const event of history.events ?? []) {
    walk(event, (bytes) => {
      if (bytes > limit) found.push({ workflowId, runId, event: String(event.eventType), bytes });
    });
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

/** Delete by predicate: rewrites each segment that holds matching rows without them. */
import { proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { RowDeleteActivities } from '../activities/row-delete.js';
import type { RowDeleteInput, RowDeleteResult } from './contracts/row-delete.js';

const ROW_DELETE_HEARTBEAT_TIMEOUT_MS = 30_000;

const { deleteMatchingRows } = proxyActivities<RowDeleteActivities>({ startToCloseTimeout: '6 hours' });

export async function rowDeleteWorkflow(input: RowDeleteInput): Promise<RowDeleteResult> {
  const { heartbeatTimeoutMs, ...task } = input;
  // It heartbeats: a worker lost mid-run is replaced within the heartbeat timeout, and the retry
  // finds only the segments the lost one had not done yet.
  const result = await deleteMatchingRows.executeWithOptions(
    {
      startToCloseTimeout: '6 hours',
      heartbeatTimeout: heartbeatTimeoutMs ?? ROW_DELETE_HEARTBEAT_TIMEOUT_MS,
      summary: `delete rows of ${task.table}`,
    },
    [task],
  );
  // What the Web UI shows on the run.
  setCurrentDetails(
    `removed ${result.rowsRemoved} rows of ${task.table}: ${result.segmentsRewritten} segments rewritten, ${result.segmentsRetired} retired whole`,
  );
  return result;
}

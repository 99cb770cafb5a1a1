/** Retention: retires the segments each table's retention period has passed, on a schedule. */
import { proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { RetentionActivities } from '../activities/retention.js';
import type { RetentionResult } from './contracts/retention.js';

// It heartbeats: a worker lost mid-run is replaced within the heartbeat timeout, and the retry
// finds only what is left to retire.
const { retireExpiredSegments } = proxyActivities<RetentionActivities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '30 seconds',
});

export async function retentionWorkflow(): Promise<RetentionResult> {
  const retired = await retireExpiredSegments.executeWithOptions(
    {
      startToCloseTimeout: '30 minutes',
      heartbeatTimeout: '30 seconds',
      summary: "retire segments past their table's retention period",
    },
    [],
  );
  // What the Web UI shows on the run.
  setCurrentDetails(
    `retired ${retired.segments} segments (${retired.rows} rows, ${retired.bytes} bytes) of ${retired.tables} tables with a retention period`,
  );
  return retired;
}

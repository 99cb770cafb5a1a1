/** The janitor: deletes retired segments' objects after the grace period, and uploads never committed. */
import { proxyActivities } from '@temporalio/workflow';
import type { JanitorActivities } from '../activities/janitor.js';
import { JANITOR_DEFAULTS, type JanitorInput, type JanitorResult } from './contracts/janitor.js';

// Both steps heartbeat: a worker lost mid-sweep is replaced within the heartbeat timeout.
const { deleteRetiredSegments, deleteOrphanObjects } = proxyActivities<JanitorActivities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '30 seconds',
});

export async function janitorWorkflow(input: JanitorInput = {}): Promise<JanitorResult> {
  const graceMs = input.graceMs ?? JANITOR_DEFAULTS.graceMs;
  const heartbeatTimeoutMs = input.heartbeatTimeoutMs ?? JANITOR_DEFAULTS.heartbeatTimeoutMs;
  const retired = await deleteRetiredSegments.executeWithOptions(
    {
      startToCloseTimeout: '30 minutes',
      heartbeatTimeout: heartbeatTimeoutMs,
      summary: `delete objects retired over ${graceMs} ms ago`,
    },
    [{ graceMs }],
  );
  const orphans = await deleteOrphanObjects.executeWithOptions(
    {
      startToCloseTimeout: '30 minutes',
      heartbeatTimeout: heartbeatTimeoutMs,
      summary: `delete uploads never committed, older than ${graceMs} ms`,
    },
    [{ graceMs }],
  );
  return { retired, orphans };
}

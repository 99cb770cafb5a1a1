/** Table drop: retires every segment of a dropped table; the janitor deletes their objects after its grace time. */
import { proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { TableDropActivities } from '../activities/table-drop.js';
import type { TableDrop, TableDropResult } from './contracts/table-drop.js';

// It heartbeats: a worker lost mid-run is replaced within the heartbeat timeout, and the retry
// finds only what is left to retire.
const { retireDroppedTable } = proxyActivities<TableDropActivities>({
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '30 seconds',
});

export async function tableDropWorkflow(drop: TableDrop): Promise<TableDropResult> {
  const retired = await retireDroppedTable.executeWithOptions(
    {
      startToCloseTimeout: '2 hours',
      heartbeatTimeout: '30 seconds',
      summary: `retire every segment of dropped table ${drop.table}`,
    },
    [drop],
  );
  // What the Web UI shows on the run.
  setCurrentDetails(
    `dropped ${drop.table} (incarnation ${drop.incarnation}): retired ${retired.segments} segments (${retired.rows} rows, ${retired.bytes} bytes); the janitor deletes their objects after its grace time`,
  );
  return retired;
}

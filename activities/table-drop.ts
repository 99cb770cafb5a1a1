/**
 * The table-drop activity: retires every active segment of a dropped table, a bounded batch per
 * call to meta. Only the manifest changes here, so queries that began before the drop finish on
 * the objects they hold; the janitor deletes the objects after its grace time. Idempotent: a
 * retry, or a second run, finds only what is left.
 */
import type { MetaClient } from '../services/meta/client.js';
import type { TableDrop, TableDropResult } from '../workflows/contracts/table-drop.js';
import { runLongStep } from './heartbeat.js';

export interface TableDropActivityDeps {
  meta: Pick<MetaClient, 'retireDropped'>;
}

/** Segments one call retires: one short write on meta's store each. */
const RETIRE_BATCH = 1_000;

export const createTableDropActivities = (deps: TableDropActivityDeps) => ({
  async retireDroppedTable(drop: TableDrop): Promise<TableDropResult> {
    return await runLongStep(async ({ signal, progress }) => {
      const retired: TableDropResult = { segments: 0, rows: 0, bytes: 0 };
      for (let more = true; more;) {
        signal.throwIfAborted();
        const batch = await deps.meta.retireDropped(drop.table, drop.incarnation, RETIRE_BATCH);
        retired.segments += batch.segments;
        retired.rows += batch.rows;
        retired.bytes += batch.bytes;
        more = batch.more;
        progress({ ...drop, ...retired });
      }
      return retired;
    });
  },
});

export type TableDropActivities = ReturnType<typeof createTableDropActivities>;

/** The contract of the delete-by-predicate workflow: what it deletes, what it reports, and its id. */
import type { RowDelete, RowDeleteReport } from '../../services/meta/api.js';

/** What the workflow is given: meta's record of the delete (services/meta/api.ts). */
export type RowDeleteTask = Pick<RowDelete, 'id' | 'table' | 'incarnation' | 'predicate' | 'from' | 'to'>;

export interface RowDeleteInput extends RowDeleteTask {
  /** How long a silent worker keeps the delete before another takes it over. @default 30000 */
  heartbeatTimeoutMs?: number;
}

/**
 * What the delete did, from meta's account of it (RowDeleteReport): per segment only the first
 * ROW_DELETE_SEGMENTS_LISTED, so that the result stays bounded however many segments the rows were
 * spread over.
 */
export type RowDeleteResult = Pick<RowDeleteReport, 'segmentsRewritten' | 'segmentsRetired' | 'perSegment'> & {
  rowsRemoved: number;
};

/** The column the checked predicate statement adds: true for a row the delete removes. */
export const DELETE_FLAG = 'berth_delete';

/** One workflow per delete: whoever starts it (the CLI, a worker's sync) finds the same run. */
export const rowDeleteWorkflowId = (task: Pick<RowDeleteTask, 'id' | 'table'>) => `delete-${task.table}-${task.id}`;

/** The contract of the table-drop workflow: what it drops, what it reports, and its id. */

/** One dropped incarnation of a table (meta's DroppedTable, without when). */
export interface TableDrop {
  table: string;
  incarnation: number;
}

/** What the drop retired: totals only, so the result stays the same size however large the table was. */
export interface TableDropResult {
  segments: number;
  rows: number;
  bytes: number;
}

/** One workflow per dropped incarnation: whoever starts it (the CLI, a worker's sync) finds the same run. */
export const tableDropWorkflowId = (drop: TableDrop) => `drop-${drop.table}-${drop.incarnation}`;

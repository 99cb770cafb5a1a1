/** Every workflow a Berth worker runs, by name. */
export { janitorWorkflow } from './janitor.js';
export { retentionWorkflow } from './retention.js';
export { tableDropWorkflow } from './table-drop.js';
export { rowDeleteWorkflow } from './row-delete.js';
export { segmentMergeWorkflow, tableMergeWorkflow } from './segment-merge.js';
export { heavyPoolWorkflow } from './heavy-pool.js';
export { poolReconcilerWorkflow } from './pool-reconciler.js';
export { preflightWorkflow } from './preflight.js';
export { servingScalerWorkflow } from './serving-scaler.js';

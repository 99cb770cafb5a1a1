/** Every activity of Berth's workflows, as types for proxyActivities and factories for workers. */
export { createJanitorActivities, type JanitorActivities } from './janitor.js';
export { createMergeActivities, type MergeActivities } from './merge.js';
export { createHeavyPoolActivities, type HeavyPoolActivities } from './heavy-pool.js';
export { createPreflightActivities, type PreflightActivities } from './preflight.js';
export { createRetentionActivities, type RetentionActivities } from './retention.js';
export { createRowDeleteActivities, type RowDeleteActivities } from './row-delete.js';
export { createTableDropActivities, type TableDropActivities } from './table-drop.js';
export { createServingScalerActivities, type ServingScalerActivities } from './serving-scaler.js';

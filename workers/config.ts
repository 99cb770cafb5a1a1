/** A worker's configuration: the variables it reads, their defaults and their ranges (see docs/configuration.md). */
import { Type, type Static } from 'typebox';
import { MemoryLimit, Millis, Settings } from '../services/common/config.js';
import { DEFAULT_RECONCILE_EVERY_MS } from './reconciler-schedule.js';
import { SCHEDULE_DEFAULTS } from './schedules.js';
import { WORKER_DEFAULTS } from './worker.js';

export const WorkerConfig = Type.Object({
  ...Settings.common,
  ...Settings.s3,
  ...Settings.metaUrl,
  ...Settings.temporal,
  // The worker drives the platform: it needs the heavy group and its cap (for preflight), and the serving group (merges push to its owners).
  BERTH_HEAVY_GROUP: Settings.heavyPool.BERTH_HEAVY_GROUP,
  BERTH_HEAVY_MAX_REPLICAS: Settings.heavyPool.BERTH_HEAVY_MAX_REPLICAS,
  BERTH_HEAVY_MEMORY_GROUP: Settings.heavyPool.BERTH_HEAVY_MEMORY_GROUP,
  BERTH_HEAVY_MEMORY_MAX_REPLICAS: Settings.heavyPool.BERTH_HEAVY_MEMORY_MAX_REPLICAS,
  ...Settings.servingScaler,
  BERTH_HEAVY_RECONCILE_MS: Millis({ default: DEFAULT_RECONCILE_EVERY_MS }),
  BERTH_PLATFORM: Type.Enum(['local', 'kubernetes'], { default: 'local' }),
  /** Required for kubernetes: where the workloads (or custom resource) are. */
  BERTH_K8S_NAMESPACE: Type.Optional(Type.String({ minLength: 1 })),
  BERTH_K8S_TARGET: Type.Enum(['workload', 'custom-resource'], { default: 'workload' }),
  /** The heavy group's workload. @default statefulset/berth-GROUP */
  BERTH_K8S_WORKLOAD: Type.Optional(Type.String()),
  /** The memory class's workload. @default statefulset/berth-GROUP */
  BERTH_K8S_MEMORY_WORKLOAD: Type.Optional(Type.String()),
  BERTH_K8S_SERVING_WORKLOAD: Type.String({ default: 'statefulset/berth-query' }),
  /** Required for custom-resource. */
  BERTH_K8S_NAME: Type.Optional(Type.String({ minLength: 1 })),
  BERTH_K8S_CR_GROUP: Type.String({ minLength: 1, default: 'disaggregated.cluster.doris.com' }),
  BERTH_K8S_CR_VERSION: Type.String({ minLength: 1, default: 'v1' }),
  BERTH_K8S_CR_PLURAL: Type.String({ minLength: 1, default: 'dorisdisaggregatedclusters' }),
  /** Required for custom-resource: the label selector of a group's pods, {group} standing for the group. */
  BERTH_K8S_POD_SELECTOR: Type.Optional(Type.String({ minLength: 1 })),
  /** @default DATA/heavy */
  BERTH_HEAVY_DIR: Type.Optional(Type.String()),
  BERTH_HEAVY_BOOT_DELAY_MS: Millis({ minimum: 0, default: 2_000 }),
  BERTH_HEAVY_VCPUS: Type.Number({ exclusiveMinimum: 0, default: 2 }),
  /** The local driver's memory-class backend: its final stages' memory limit, as a container's limit would size it. */
  BERTH_HEAVY_MEMORY_LIMIT: MemoryLimit({ default: '50%' }),
  /** The local driver's heavy backends' nice value (BERTH_NODE_NICENESS): below the serving tier's CPU priority. */
  BERTH_HEAVY_NICENESS: Type.Integer({ minimum: 0, maximum: 19, default: 10 }),
  BERTH_MERGE_CONCURRENCY: Type.Integer({ minimum: 1, default: WORKER_DEFAULTS.mergeConcurrency }),
  BERTH_WORKER_SHUTDOWN_GRACE_MS: Millis({ minimum: 0, default: WORKER_DEFAULTS.shutdownGraceMs }),
  /** @default DATA/worker */
  BERTH_WORKER_DIR: Type.Optional(Type.String()),
  /** HOST:PORT for the Temporal SDK's metrics; unset: off. */
  BERTH_WORKER_METRICS_ADDRESS: Type.Optional(Type.String({ pattern: '^[^:]+:[0-9]+$' })),
  /** @default dist/workflow-bundle.js */
  BERTH_WORKFLOW_BUNDLE: Type.Optional(Type.String()),
  BERTH_MERGE_EVERY_MS: Millis({ default: SCHEDULE_DEFAULTS.mergeEveryMs }),
  BERTH_MERGE_MIN_INPUTS: Type.Integer({ minimum: 2, default: SCHEDULE_DEFAULTS.mergeMinInputs }),
  BERTH_MERGE_MAX_INPUTS: Type.Integer({ minimum: 2, default: SCHEDULE_DEFAULTS.mergeMaxInputs }),
  BERTH_JANITOR_EVERY_MS: Millis({ default: SCHEDULE_DEFAULTS.janitorEveryMs }),
  BERTH_RETENTION_EVERY_MS: Millis({ default: SCHEDULE_DEFAULTS.retentionEveryMs }),
  BERTH_JANITOR_GRACE_MS: Millis({ minimum: 0, default: SCHEDULE_DEFAULTS.janitorGraceMs }),
  /** 0 turns the schedules off. */
  BERTH_SCHEDULE_SYNC_MS: Millis({ minimum: 0, default: 30_000 }),
  /** @default each schedule's interval, at least 60000 */
  BERTH_SCHEDULE_CATCHUP_MS: Type.Optional(Millis()),
});
export type WorkerConfig = Static<typeof WorkerConfig>;

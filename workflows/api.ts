/**
 * What services, the CLI and workers share about Berth's workflows without importing worker code:
 * the task queue, workflow ids, search attributes and the inputs and results of each workflow.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { CoordinatorAdmission, CoordinatorDemand } from '../core/admission.js';
import type { NodeUsage } from '../core/node-hours.js';
import type { PreflightReport } from '../core/preflight.js';
import type { ServingPlan, ServingScaleSettings } from '../core/serving-scale.js';

/** Pool control (the heavy pool's workflow and its activities) runs on this task queue. */
export const TASK_QUEUE = 'berth';
/** Merges and the janitor run on a queue of their own next to it, so that a long merge never delays a launch. */
export const mergeTaskQueueFor = (taskQueue: string) => `${taskQueue}-merge`;
export const MERGE_TASK_QUEUE = mergeTaskQueueFor(TASK_QUEUE);

/** Search attributes, registered on the namespace, so `temporal workflow list --query` finds runs. */
export const SEARCH_ATTRIBUTES = {
  table: defineSearchAttributeKey('BerthTable', SearchAttributeType.KEYWORD),
  partition: defineSearchAttributeKey('BerthPartition', SearchAttributeType.KEYWORD),
  group: defineSearchAttributeKey('BerthGroup', SearchAttributeType.KEYWORD),
  phase: defineSearchAttributeKey('BerthPhase', SearchAttributeType.KEYWORD),
};

/** The failure type of a merge commit whose inputs another merge already retired (never retried). */
export const LOST_MERGE_RACE = 'LostMergeRace';
/** The failure type of a step whose lease another holder took while it ran (never retried). */
export const LEASE_LOST = 'LeaseLost';
/** The failure type of a merge commit that meta refused for a reason no retry can change, e.g. a merged id already committed with other contents (never retried). */
export const MERGE_REFUSED = 'MergeRefused';

// ── merge ────────────────────────────────────────────────────────────────────────────────────

export interface MergeInput {
  table: string;
  /** The UTC day of the inputs' earliest timestamps, YYYYMMDD. */
  partition: string;
  /** Level of the inputs; the merged segment is one level up. @default 0 */
  level?: number;
  /** Fewest inputs worth a merge. @default 2 */
  minInputs?: number;
  /** Most inputs one merge takes. @default 100 */
  maxInputs?: number;
  /** Lease time-to-live in ms; the long steps renew it every third of it while they run. @default 600000 */
  leaseTtlMs?: number;
  /** How long to wait for a lease another holder has before giving up. @default twice the TTL */
  leaseWaitMs?: number;
  /** How often to look again at a lease another holder has. @default 5000 */
  leasePollMs?: number;
  /** A step whose worker stops heartbeating for this long is retried elsewhere. @default 30000 */
  heartbeatTimeoutMs?: number;
}

export interface MergeResult {
  /** `lease-lost`: another holder took the lease while the merge ran (its TTL ran out unrenewed). */
  outcome: 'merged' | 'nothing-to-merge' | 'lease-held' | 'lease-lost' | 'lost-race';
  table: string;
  partition: string;
  inputs: string[];
  merged?: { id: string; rows: number; bytes: number; level: number };
  push?: { owner: string | null; accepted: boolean; reason?: string };
}

/** One merge per table, partition and level at a time: the id says which. */
export const mergeWorkflowId = (table: string, partition: string, level = 0) => `merge-${table}-${partition}-l${level}`;

export interface TableMergeInput {
  table: string;
  level?: number;
  minInputs?: number;
  maxInputs?: number;
}

export interface TableMergeResult {
  table: string;
  partitions: { partition: string; outcome: MergeResult['outcome'] | 'already-running' }[];
}

/** The Temporal Schedule that merges a table periodically. */
export const mergeScheduleId = (table: string) => `merge-${table}`;

// ── janitor ──────────────────────────────────────────────────────────────────────────────────

export interface JanitorInput {
  /** Retired objects and uncommitted uploads younger than this are kept. @default 3600000 */
  graceMs?: number;
}

export interface JanitorResult {
  retiredDeleted: string[];
  orphansDeleted: string[];
}

export const JANITOR_SCHEDULE_ID = 'janitor';

// ── heavy pool ───────────────────────────────────────────────────────────────────────────────

export { LARGEST_SANE_TARGET } from '../core/pool-rules.js';

export interface PoolConfig {
  /** The compute group this pool scales. */
  group: string;
  /** Capacity moves in steps of this many replicas. @default 2 */
  increment?: number;
  /** The most replicas the pool ever asks for. @default 4 */
  maxReplicas?: number;
  /** Back to zero after this long with nothing running or waiting. @default 300000 */
  idleTimeoutMs?: number;
  /** How long one readiness observation may wait for backends before it reports progress. @default 20000 */
  readinessWaitMs?: number;
  /** How long after the first observation of every new backend alive the second one is made. @default 300 */
  readinessConfirmMs?: number;
  /** Waiting queries above zero for this long raise the target by one increment. @default 30000 */
  monitorSustainMs?: number;
  /** Queries running on the pool at once, over every coordinator (workload group max_concurrency). @default 16 */
  maxConcurrency?: number;
  /** Queries waiting for the pool at once, over every coordinator (max_queue_size). @default 1000 */
  maxQueueSize?: number;
  /** A launch that is not serve-ready after this long fails, naming the layer that never passed. @default 900000 */
  launchDeadlineMs?: number;
  /** A coordinator that has not reported its queries for this long is forgotten (it died). @default 90000 */
  reportTtlMs?: number;
}

/** Every setting of a pool, defaults filled in. */
export type PoolSettings = Required<PoolConfig>;

export const POOL_DEFAULTS: Omit<PoolSettings, 'group'> = {
  increment: 2,
  maxReplicas: 4,
  idleTimeoutMs: 300_000,
  readinessWaitMs: 20_000,
  readinessConfirmMs: 300,
  monitorSustainMs: 30_000,
  maxConcurrency: 16,
  maxQueueSize: 1_000,
  launchDeadlineMs: 900_000,
  reportTtlMs: 90_000,
};

export const poolSettings = (config: PoolConfig): PoolSettings => ({
  ...POOL_DEFAULTS,
  ...Object.fromEntries(Object.entries(config).filter(([, v]) => v !== undefined)),
  group: config.group,
});

export interface LaunchRequest {
  target: number;
  /** When given, must be the pool's group. */
  group?: string;
}

export interface LaunchAccepted {
  workflowId: string;
  /** The pool's target after this request: rounded up to the increment, capped, never lowered. */
  accepted: number;
}

export type PoolPhase = 'parked' | 'scaling' | 'waiting-for-backends' | 'canary' | 'ready' | 'draining';
export type ReadinessLayer = 'pods' | 'backends' | 'canary';

/** The last launch that failed, and why; queries waiting for it were answered with this message. */
export interface PoolFailure {
  /** Counts failed launches: a coordinator fails the queries it had waiting when it sees a new one. */
  epoch: number;
  at: number;
  message: string;
}

export interface PoolStatus {
  group: string;
  phase: PoolPhase;
  /** The replica target the pool is working towards. */
  target: number;
  /** The replicas last written to the platform. */
  replicasPatched: number;
  /** How many times replicas were written. */
  patches: number;
  podsRunning: number;
  aliveBackends: number;
  serveReady: boolean;
  /** Why the pool is not serve-ready, in words: the layer that has not passed (and what the platform says). */
  notReady?: string;
  /** While pods are missing: why, quoted from the platform (its scheduler's and autoscaler's events). */
  platformSays?: string;
  /** Readiness layers passed since the last scale-up, in order. */
  layersPassed: ReadinessLayer[];
  /** Backends that passed every layer: heavy queries run on these only. */
  backends: string[];
  /** Queries running on the pool and waiting for it, over every coordinator. */
  running: number;
  waiting: number;
  maxConcurrency: number;
  maxQueueSize: number;
  /** Coordinators with queries on the pool. */
  coordinators: number;
  lastActivity: number;
  /** When the idle reaper will park the pool, if nothing arrives. */
  idleDeadline?: number;
  /** When the launch under way fails if the pool is still not serve-ready. */
  launchDeadline?: number;
  lastFailure?: PoolFailure;
  /** The node-hours ledger of this UTC month (status) or of every kept day (usage query). */
  usage?: NodeUsage;
  /** Node-hours used today and this month (UTC), counted by the controller from `usage` with its own clock. */
  nodeHours?: { today: number; month: number };
}

/** A pool at zero: the floor, not a fault. */
export const parkedStatus = (config: PoolConfig, lastActivity = 0): PoolStatus => {
  const settings = poolSettings(config);
  return {
    group: settings.group,
    phase: 'parked',
    target: 0,
    replicasPatched: 0,
    patches: 0,
    podsRunning: 0,
    aliveBackends: 0,
    serveReady: false,
    layersPassed: [],
    backends: [],
    running: 0,
    waiting: 0,
    maxConcurrency: settings.maxConcurrency,
    maxQueueSize: settings.maxQueueSize,
    coordinators: 0,
    lastActivity,
  };
};

/** A coordinator's report of its heavy queries: absolute counts, so a retried report changes nothing. */
export interface DemandReport extends Omit<CoordinatorDemand, 'waitingSince'> {
  /** A coordinator's id, new at each start. */
  coordinator: string;
  /**
   * The last failure epoch the coordinator has seen (from an answer); omitted by a coordinator that
   * has had no answer yet. Demand from before a failed launch launches nothing.
   */
  epoch?: number;
}

/** What a coordinator may do now: run `grant` queries at once, keep `queued` waiting, on `backends`. */
export interface AdmissionAnswer extends Pick<CoordinatorAdmission, 'grant' | 'queued'> {
  serveReady: boolean;
  phase: PoolPhase;
  notReady?: string;
  backends: string[];
  epoch: number;
  lastFailure?: PoolFailure;
  /** The group's queue, over every coordinator. */
  running: number;
  waiting: number;
}

export interface PoolWorkflowInput {
  config: PoolConfig;
  /** The pool's whole state, carried across continue-as-new. */
  carried?: PoolMemory;
}

/** Everything the pool remembers; plain data, so it crosses continue-as-new as it is. */
export interface PoolMemory {
  status: PoolStatus;
  /** Each coordinator's counts, grant and queue places, and when it last reported. */
  admissions: Record<string, CoordinatorAdmission>;
  reportedAt: Record<string, number>;
  epoch: number;
  /** Bumps on every launch, so that a drain can tell one arrived. */
  launches: number;
  waitingSince?: number;
  /** The scale-up under way: when it began and was patched, the backends found so far, whether it looked yet. */
  scaling?: {
    startedAt: number;
    patchedAt: number;
    previous: number;
    fresh: { id: string; url: string }[];
    looked: boolean;
  };
  /** The replicas the pool asked for over time, by UTC day (absent in runs from before the ledger). */
  usage?: NodeUsage;
}

export const poolWorkflowId = (group: string) => `heavy-pool-${group}`;
export const launchUpdate = defineUpdate<LaunchAccepted, [LaunchRequest]>('launch');
export const launchSignal = defineSignal<[LaunchRequest]>('launchSignal');
/** A coordinator's report; answered at once (never held open), so updates in flight stay few. */
export const reportDemandUpdate = defineUpdate<AdmissionAnswer, [DemandReport]>('reportDemand');
export const statusQuery = defineQuery<PoolStatus>('status');
/** The pool's whole node-hours ledger (every kept day), for `berth cost`. */
export const usageQuery = defineQuery<NodeUsage>('usage');
/** What one coordinator may do now; polled by a coordinator while it has queries waiting. */
export const admissionQuery = defineQuery<AdmissionAnswer, [string]>('admission');

// ── reconciler ───────────────────────────────────────────────────────────────────────────────

export interface ReconcileInput {
  /** The groups a pool workflow scales. */
  groups: string[];
}

export interface ReconcileResult {
  /** Groups found with replicas and no pool workflow running, now patched to zero. */
  parked: { group: string; replicas: number }[];
}

export const RECONCILER_SCHEDULE_ID = 'heavy-pool-reconciler';

// ── preflight ────────────────────────────────────────────────────────────────────────────────

export interface PreflightInput {
  group: string;
}

export type { PreflightReport };

/** One preflight per group at a time: concurrent callers share it. */
export const preflightWorkflowId = (group: string) => `preflight-${group}`;

// ── serving-group autoscaler (opt-in) ────────────────────────────────────────────────────────

export interface ServingScalerConfig extends Partial<ServingScaleSettings> {
  /** The serving group it scales. */
  group: string;
  /** A coordinator silent this long is forgotten (its load with it). @default 30000 */
  reportTtlMs?: number;
}

export type ServingScalerSettings = Required<ServingScalerConfig>;

export const SERVING_SCALER_DEFAULTS: Omit<ServingScalerSettings, 'group'> = {
  floor: 1,
  max: 8,
  waitingThreshold: 0,
  sustainMs: 30_000,
  idleMs: 600_000,
  reportTtlMs: 30_000,
};

export const servingScalerSettings = (config: ServingScalerConfig): ServingScalerSettings => ({
  ...SERVING_SCALER_DEFAULTS,
  ...Object.fromEntries(Object.entries(config).filter(([, v]) => v !== undefined)),
  group: config.group,
});

/** A coordinator's serving queue: absolute counts, sent while it has queries and once when it empties. */
export interface ServingLoadReport {
  coordinator: string;
  running: number;
  waiting: number;
}

export interface ServingScalerStatus {
  group: string;
  /** The replicas the platform has from the scaler (its own workload's, not every member of the group). */
  replicas: number;
  floor: number;
  max: number;
  running: number;
  waiting: number;
  coordinators: number;
  /** Since when waiting has been above the threshold, or the group idle. */
  pressedSince?: number;
  idleSince?: number;
  /** The last steps, each with what it was expected to move, said before it was taken (newest last). */
  steps: ServingPlan[];
}

export interface ServingScalerMemory {
  replicas?: number;
  loads: Record<string, { running: number; waiting: number; at: number }>;
  pressedSince?: number;
  idleSince?: number;
  steps: ServingPlan[];
}

export interface ServingScalerInput {
  config: ServingScalerConfig;
  carried?: ServingScalerMemory;
}

export const servingScalerWorkflowId = (group: string) => `serving-scaler-${group}`;
export const servingLoadSignal = defineSignal<[ServingLoadReport]>('servingLoad');
export const servingScalerStatusQuery = defineQuery<ServingScalerStatus>('servingScalerStatus');

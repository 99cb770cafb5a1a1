/**
 * What services, the CLI and workers share about Berth's workflows without importing worker code:
 * the task queue, workflow ids, search attributes and the inputs and results of each workflow.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';

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

/** A target past this is a mistake, not a request: the validator rejects it instead of capping it. */
export const LARGEST_SANE_TARGET = 10_000;

export interface PoolConfig {
  /** The compute group this pool scales. */
  group: string;
  /** Capacity moves in steps of this many replicas. @default 2 */
  increment?: number;
  /** The most replicas the pool ever asks for. @default 4 */
  maxReplicas?: number;
  /** Back to zero after this long with nothing running or waiting. @default 300000 */
  idleTimeoutMs?: number;
  /** How often readiness is observed. @default 2000 */
  readinessPollMs?: number;
  /** Waiting queries above zero for this long raise the target by one increment. @default 30000 */
  monitorSustainMs?: number;
  /** How often the monitor reads the group's waiting queries. @default 10000 */
  monitorPollMs?: number;
}

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
  /** Why the pool is not serve-ready, in words. */
  notReady?: string;
  /** Readiness layers passed since the last scale-up, in order. */
  layersPassed: ('pods' | 'backends' | 'canary')[];
  running: number;
  waiting: number;
  lastActivity: number;
  /** When the idle reaper will park the pool, if nothing arrives. */
  idleDeadline?: number;
}

/** A pool at zero: the floor, not a fault. */
export const parkedStatus = (group: string, lastActivity = 0): PoolStatus => ({
  group,
  phase: 'parked',
  target: 0,
  replicasPatched: 0,
  patches: 0,
  podsRunning: 0,
  aliveBackends: 0,
  serveReady: false,
  layersPassed: [],
  running: 0,
  waiting: 0,
  lastActivity,
});

export interface HeavyQueryRequest {
  queryId: string;
  sql: string;
}

export interface HeavyQueryResult {
  columns: string[];
  types: string[];
  rows: unknown[][];
  stats: Record<string, unknown>;
}

export interface PoolWorkflowInput {
  config: PoolConfig;
  /** State carried across continue-as-new. */
  carried?: { target: number; replicasPatched: number; patches: number; lastActivity: number };
}

export const poolWorkflowId = (group: string) => `heavy-pool-${group}`;
export const launchUpdate = defineUpdate<LaunchAccepted, [LaunchRequest]>('launch');
export const launchSignal = defineSignal<[LaunchRequest]>('launchSignal');
export const runQueryUpdate = defineUpdate<HeavyQueryResult, [HeavyQueryRequest]>('runQuery');
export const statusQuery = defineQuery<PoolStatus>('status');

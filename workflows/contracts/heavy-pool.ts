/**
 * The contract of the heavy pool's workflow (heavyPoolWorkflow): its config and settings, its
 * memory and status, and its messages (launch, reportDemand, status, usage, admission).
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { CoordinatorAdmission, CoordinatorDemand } from '../../core/admission.js';
import type { NodeUsage } from '../../core/node-hours.js';
import { withDefaults } from './shared.js';

export { LARGEST_SANE_TARGET } from '../../core/pool-rules.js';

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
  /**
   * The verdicts this group serves: `scan` (the scan class, scaled out by its increment) or
   * `memory` (the memory class, scaled up: one big backend per launch). @default 'scan'
   */
  bottleneck?: 'scan' | 'memory';
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
  bottleneck: 'scan',
};

/** How a pool grows, in words for the Temporal Web UI: the shape of its capacity. */
export const poolShape = (settings: PoolSettings): string =>
  settings.bottleneck === 'memory'
    ? 'memory class: scaled up, one backend per launch'
    : `scan class: scaled out by ${settings.increment}`;

/**
 * What the Temporal Web UI says a pool is: the first run's static summary, and every run's current
 * details (a static summary is not carried across continue-as-new).
 */
export const poolSummary = (settings: PoolSettings): string => `heavy pool ${settings.group} (${poolShape(settings)})`;

export const poolSettings = (config: PoolConfig): PoolSettings => ({
  ...withDefaults<PoolSettings>(POOL_DEFAULTS, config),
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
export const parkedStatus = (settings: PoolSettings, lastActivity = 0): PoolStatus => ({
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
});

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

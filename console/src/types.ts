/**
 * The shapes the console reads, as the coordinator's and controller's contracts define them
 * (services/coordinator/api.ts, workflows/contracts/heavy-pool.ts, core/node-hours.ts,
 * core/preflight.ts, core/placement-simulation.ts): only the fields shown here.
 */
export interface WarmShare {
  segments: number;
  bytes: number;
  warmBytes: number;
  fraction: number;
}

export interface NodeRow {
  id: string;
  group: string;
  url: string;
  alive: boolean;
  lastHeartbeat: string;
  weight: number;
  share: number;
  warmth?: { owned?: WarmShare; moved?: WarmShare & { since: string } };
}

export interface TableInfo {
  name: string;
  timestampColumn: string | null;
  columns: { name: string; type: string }[];
}

export interface TableDetails extends TableInfo {
  schema: string;
  segments: number;
  rows: number;
  bytes: number;
  oldest: number | null;
  newest: number | null;
  retentionMs: number | null;
}

export type Verdict = { class: 'light' } | { class: 'heavy'; bottleneck: 'scan' | 'memory'; reason: string };

export interface QueryStats {
  result: 'computed' | 'cached';
  verdict: Verdict;
  group: string;
  route: string;
  reason?: string;
  plan: string;
  stages: { scan: unknown[]; final: string };
  segments: { total: number; scanned: number; pruned: number };
  scanBytes: number;
  bytesMoved: number;
  nodes: Record<string, number>;
  cacheHits: number;
  cacheMisses: number;
  elapsedMs: number;
  timings: { planMs: number; queuedMs: number; scanMs: number; finalMs: number };
  pool?: { workflowId: string; waitedMs: number };
}

export type Cell = null | boolean | number | string | Cell[] | { [key: string]: Cell };

export interface QueryResult {
  columns: string[];
  types: string[];
  rows: Cell[][];
  stats: QueryStats;
}

export interface RecentQuery {
  id: number;
  at: number;
  sql: string;
  rows?: number;
  stats?: QueryStats;
  error?: string;
}

/** The readiness layers a launch passes, in order (workflows/contracts/heavy-pool.ts, ReadinessLayer). */
export const READINESS_LAYERS = ['pods', 'backends', 'canary'] as const;

export interface PoolStatus {
  group: string;
  phase: string;
  target: number;
  podsRunning: number;
  aliveBackends: number;
  serveReady: boolean;
  notReady?: string;
  layersPassed: string[];
  backends: string[];
  running: number;
  waiting: number;
  idleDeadline?: number;
  lastFailure?: { at: number; message: string };
  nodeHours?: { today: number; month: number };
}

/** What `berth cost` prints for the pool: its node-hours over the window and their bill. */
export interface PoolCost {
  window: { fromDay: string; days: number; nodeHours: number; peak: number; hours: number };
  bill: { pricePerNodeHour: number; poolCost: number; residentNodes: number; residentCost: number; saving: number };
}

export interface PoolView {
  group: string;
  workflowId: string;
  link?: string;
  status?: PoolStatus;
  cost?: PoolCost;
  error?: string;
}

/** A workload group's admission: SHOW WORKLOAD GROUPS, from the coordinator. */
export interface WorkloadGroup {
  name: string;
  running: number;
  waiting: number;
  maxConcurrency?: number;
  maxQueueSize?: number;
  unavailable?: string;
}

export interface PreflightReport {
  group: string;
  platform: string;
  checks: { area: string; ok: boolean; summary: string; detail: string[]; fix?: string }[];
  findings: number;
}

export interface SegmentDay {
  day: string;
  segments: number;
  rows: number;
  bytes: number;
}

export interface NodeShare {
  weight: number;
  share: number;
  segments: number;
}

/** The placement what-if: `berth placement simulate` over the live members and one change. */
export interface WhatIf {
  nodes: string;
  add?: string;
  remove?: string;
  result: {
    segments: number;
    before: Record<string, NodeShare>;
    after: Record<string, NodeShare>;
    moved: { segments: number; fraction: number; byPair: Record<string, number> };
  };
}

/** A meta replica the coordinator calls, and whether its readiness probe answered. */
export interface MetaReplica {
  url: string;
  ready: boolean;
  error?: string;
}

/**
 * What services, the CLI and workers share about Berth's workflows without importing worker code:
 * the task queue, workflow ids, search attributes and the inputs and results of each workflow.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const TASK_QUEUE = 'berth';

/** Search attributes, registered on the namespace, so `temporal workflow list --query` finds runs. */
export const SEARCH_ATTRIBUTES = {
  table: defineSearchAttributeKey('BerthTable', SearchAttributeType.KEYWORD),
  partition: defineSearchAttributeKey('BerthPartition', SearchAttributeType.KEYWORD),
};

/** The failure type of a merge commit whose inputs another merge already retired (never retried). */
export const LOST_MERGE_RACE = 'LostMergeRace';

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
  /** Lease time-to-live in ms. @default 600000 */
  leaseTtlMs?: number;
  /** How long to wait for a lease another holder has before giving up. @default twice the TTL */
  leaseWaitMs?: number;
  /** How often to look again at a lease another holder has. @default 5000 */
  leasePollMs?: number;
  /** A step whose worker stops heartbeating for this long is retried elsewhere. @default 30000 */
  heartbeatTimeoutMs?: number;
}

export interface MergeResult {
  outcome: 'merged' | 'nothing-to-merge' | 'lease-held' | 'lost-race';
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

/** The contract of the merge workflows (segmentMergeWorkflow, tableMergeWorkflow): inputs, results, ids, defaults. */

/** The failure type of a merge commit whose inputs another merge already retired (never retried). */
export const LOST_MERGE_RACE = 'LostMergeRace';
/** The failure type of a step whose lease another holder took while it ran (never retried). */
export const LEASE_LOST = 'LeaseLost';
/** The failure type of a merge commit that meta refused for a reason no retry can change, e.g. a merged id already committed with other contents (never retried). */
export const MERGE_REFUSED = 'MergeRefused';
/** The failure type of a merge whose written segment's columns are not its table's (never retried: the inputs disagree with meta). */
export const SEGMENT_DISAGREES = 'SegmentDisagrees';

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

/** Every setting of a merge, defaults filled in. */
export type MergeSettings = Required<MergeInput>;

export const MERGE_DEFAULTS = {
  level: 0,
  minInputs: 2,
  maxInputs: 100,
  leaseTtlMs: 600_000,
  leasePollMs: 5_000,
  heartbeatTimeoutMs: 30_000,
} satisfies Omit<MergeSettings, 'table' | 'partition' | 'leaseWaitMs'>;

export const mergeSettings = (input: MergeInput): MergeSettings => {
  const leaseTtlMs = input.leaseTtlMs ?? MERGE_DEFAULTS.leaseTtlMs;
  return {
    table: input.table,
    partition: input.partition,
    level: input.level ?? MERGE_DEFAULTS.level,
    minInputs: input.minInputs ?? MERGE_DEFAULTS.minInputs,
    maxInputs: input.maxInputs ?? MERGE_DEFAULTS.maxInputs,
    leaseTtlMs,
    leaseWaitMs: input.leaseWaitMs ?? 2 * leaseTtlMs,
    leasePollMs: input.leasePollMs ?? MERGE_DEFAULTS.leasePollMs,
    heartbeatTimeoutMs: input.heartbeatTimeoutMs ?? MERGE_DEFAULTS.heartbeatTimeoutMs,
  };
};

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
  /** @default 0 */
  level?: number;
  /** @default 2 */
  minInputs?: number;
  /** Passed on to each partition's merge as given. @default 100 (the merge's) */
  maxInputs?: number;
}

export interface TableMergeResult {
  table: string;
  partitions: { partition: string; outcome: MergeResult['outcome'] | 'already-running' }[];
}

/** The Temporal Schedule that merges a table periodically. */
export const mergeScheduleId = (table: string) => `merge-${table}`;

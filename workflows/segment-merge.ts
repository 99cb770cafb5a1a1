/**
 * Merge-then-push: under a lease for one table, partition and level, merge the small segments into
 * one sorted Parquet, push it into its owner's cache, then swap it for its inputs in the manifest.
 * A push that is declined or fails only means a cold first read; a lost race commits nothing. The
 * long steps renew the lease while they run, however long that is.
 *
 * Since MERGE_IN_ONE_STEP, three activities: the lease taken with the inputs picked, then the
 * merge, upload, push and swap in one (its heartbeats let a retry resume where it stopped), then
 * the release. Runs from before it replay the six they had.
 */
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  executeChild,
  patched,
  proxyActivities,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { MergeActivities } from '../activities/merge.js';
import type { SegmentRow } from '../services/meta/client.js';
import { SEARCH_ATTRIBUTES } from './contracts/shared.js';
import {
  LEASE_LOST,
  LOST_MERGE_RACE,
  MERGE_DEFAULTS,
  mergeSettings,
  mergeWorkflowId,
  type MergeInput,
  type MergeResult,
  type TableMergeInput,
  type TableMergeResult,
} from './contracts/segment-merge.js';

const STEPS_RENEW_LEASE = 'merge-steps-renew-lease';
const MERGE_IN_ONE_STEP = 'merge-in-one-step';

const activities = (heartbeatTimeoutMs: number) =>
  proxyActivities<MergeActivities>({
    startToCloseTimeout: '30 minutes',
    heartbeatTimeout: heartbeatTimeoutMs,
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
  });

export async function segmentMergeWorkflow(input: MergeInput): Promise<MergeResult> {
  const settings = mergeSettings(input);
  const { level, leaseTtlMs: ttlMs, heartbeatTimeoutMs } = settings;
  const { acquireLease, releaseLease, pickMergeInputs, mergeSegments, pushToOwner, commitMerge, mergePushAndCommit } =
    activities(heartbeatTimeoutMs);
  upsertSearchAttributes([
    { key: SEARCH_ATTRIBUTES.table, value: input.table },
    { key: SEARCH_ATTRIBUTES.partition, value: input.partition },
  ]);
  const result = (outcome: MergeResult['outcome'], extra: Partial<MergeResult> = {}): MergeResult => ({
    outcome,
    table: input.table,
    partition: input.partition,
    inputs: [],
    ...extra,
  });

  const lease = { name: `merge:${input.table}:${input.partition}:l${level}`, holder: workflowInfo().workflowId, ttlMs };
  const pick = { table: input.table, partition: input.partition, level, maxInputs: settings.maxInputs };
  const oneStep = patched(MERGE_IN_ONE_STEP);
  const giveUpAt = Date.now() + settings.leaseWaitMs;
  let token: number | undefined; // the lease's fencing token: the swap commits only while the lease still carries it
  let picked: SegmentRow[] | undefined; // picked with the lease, in one step
  for (;;) {
    const attempt = await acquireLease.executeWithOptions(
      { startToCloseTimeout: '1 minute', summary: `take lease ${lease.name}` },
      [oneStep ? { ...lease, pick } : lease],
    );
    if (attempt.granted) {
      token = attempt.token;
      picked = attempt.inputs;
      break;
    }
    if (Date.now() >= giveUpAt) return result('lease-held');
    // Another holder, maybe a dead one: look again when it may have let go, and at the latest when its lease runs out.
    await sleep(Math.max(100, Math.min(attempt.expiresAt - Date.now(), settings.leasePollMs, giveUpAt - Date.now())));
  }

  let inputs: string[] = [];
  try {
    picked ??= await pickMergeInputs(pick);
    inputs = picked.map((s) => s.id);
    if (inputs.length < settings.minInputs) return result('nothing-to-merge', { inputs });
    const bytes = picked.reduce((sum, s) => sum + s.bytes, 0);
    const fence = token === undefined ? undefined : { lease: lease.name, token };
    if (oneStep) {
      const { merged, push } = await mergePushAndCommit.executeWithOptions(
        {
          startToCloseTimeout: '30 minutes',
          heartbeatTimeout: heartbeatTimeoutMs,
          summary: `merge ${inputs.length} level-${level} segments of ${input.table}/${input.partition} (${bytes} bytes), push to the owner, swap in`,
        },
        [{ table: input.table, partition: input.partition, level, inputs, lease, fence }],
      );
      return result('merged', {
        inputs,
        merged: { id: merged.id, rows: merged.rows, bytes: merged.bytes, level: merged.level },
        push,
      });
    }
    const merged = await mergeSegments.executeWithOptions(
      {
        startToCloseTimeout: '30 minutes',
        heartbeatTimeout: heartbeatTimeoutMs,
        summary: `merge ${inputs.length} level-${level} segments of ${input.table}/${input.partition} (${bytes} bytes)`,
      },
      [{ table: input.table, partition: input.partition, level, inputs, lease }],
    );
    // Runs started before the steps renewed the lease themselves renewed it here: replay them as they ran.
    if (!patched(STEPS_RENEW_LEASE)) await acquireLease(lease);
    const push = await pushToOwner.executeWithOptions(
      {
        startToCloseTimeout: '5 minutes',
        heartbeatTimeout: heartbeatTimeoutMs,
        summary: `push ${merged.id} (${merged.bytes} bytes) into its owner's cache`,
      },
      [{ table: input.table, segmentId: merged.id, lease }],
    );
    await commitMerge.executeWithOptions(
      { startToCloseTimeout: '1 minute', summary: `swap ${inputs.length} segments for ${merged.id} in the manifest` },
      [{ inputs, merged, fence }],
    );
    return result('merged', {
      inputs,
      merged: { id: merged.id, rows: merged.rows, bytes: merged.bytes, level: merged.level },
      push,
    });
  } catch (error) {
    const type =
      error instanceof ActivityFailure && error.cause instanceof ApplicationFailure ? error.cause.type : undefined;
    if (type === LOST_MERGE_RACE) return result('lost-race', { inputs });
    if (type === LEASE_LOST) return result('lease-lost', { inputs });
    throw error;
  } finally {
    await CancellationScope.nonCancellable(() => releaseLease(lease));
  }
}

/** The scheduled pass over one table: a merge for every partition with enough small segments. */
export async function tableMergeWorkflow(input: TableMergeInput): Promise<TableMergeResult> {
  const level = input.level ?? MERGE_DEFAULTS.level;
  const minInputs = input.minInputs ?? MERGE_DEFAULTS.minInputs;
  const { listMergeablePartitions } = activities(MERGE_DEFAULTS.heartbeatTimeoutMs);
  upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.table, value: input.table }]);
  const partitions: TableMergeResult['partitions'] = [];
  for (const partition of await listMergeablePartitions({ table: input.table, level, minInputs })) {
    try {
      const merged = await executeChild(segmentMergeWorkflow, {
        workflowId: mergeWorkflowId(input.table, partition, level),
        args: [{ table: input.table, partition, level, minInputs, maxInputs: input.maxInputs }],
      });
      partitions.push({ partition, outcome: merged.outcome });
    } catch (error) {
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
      partitions.push({ partition, outcome: 'already-running' });
    }
  }
  return { table: input.table, partitions };
}

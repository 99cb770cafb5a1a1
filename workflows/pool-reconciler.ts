/**
 * The heavy pool's safety net, run by a Schedule: a pool workflow parks its group before it ends,
 * but one that is terminated, cancelled or lost cannot. This finds every group with replicas above
 * zero and no pool workflow running, and patches it to zero, so paid capacity never outlives its
 * workflow by more than one reconcile interval.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { HeavyPoolActivities } from '../activities/heavy-pool.js';
import type { ReconcileInput, ReconcileResult } from './contracts/pool-reconciler.js';

const { parkOrphanedGroups } = proxyActivities<HeavyPoolActivities>({
  startToCloseTimeout: '1 minute',
  retry: { maximumAttempts: 3 },
});

export async function poolReconcilerWorkflow(input: ReconcileInput): Promise<ReconcileResult> {
  return await parkOrphanedGroups.executeWithOptions(
    {
      startToCloseTimeout: '1 minute',
      retry: { maximumAttempts: 3 },
      summary: `park any of ${input.groups.join(', ')} left with replicas and no pool workflow`,
    },
    [input],
  );
}

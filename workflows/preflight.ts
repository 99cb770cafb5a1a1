/**
 * A preflight of a compute group, run on a worker because the worker holds the platform's
 * credentials: the rights it checks are the worker's own. One activity, few retries: a preflight
 * that cannot run says so instead of hanging its caller.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { PreflightActivities } from '../activities/preflight.js';
import type { PreflightInput, PreflightReport } from './contracts/preflight.js';

const { preflight } = proxyActivities<PreflightActivities>({
  startToCloseTimeout: '1 minute',
  retry: { maximumAttempts: 2 },
});

export async function preflightWorkflow(input: PreflightInput): Promise<PreflightReport> {
  return await preflight.executeWithOptions(
    {
      startToCloseTimeout: '1 minute',
      retry: { maximumAttempts: 2 },
      summary: `preflight of ${input.group}: requests against nodes, placement, rights, meta, storage`,
    },
    [input],
  );
}

/** The contract of the preflight workflow: its input, its report and its id. */
import type { PreflightReport } from '../../core/preflight.js';

export interface PreflightInput {
  group: string;
}

export type { PreflightReport };

/** One preflight per group at a time: concurrent callers share it. */
export const preflightWorkflowId = (group: string) => `preflight-${group}`;
